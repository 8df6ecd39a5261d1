/* cache_server: a small socket server for the server tests (tests/test_servers_*.py): it
 * allocates per request and keeps a cache, as a real one does.
 *
 *   cache_server PORT [crash-under WORD]
 *
 * Listens on 127.0.0.1:PORT (a line on stderr and exit 1 when it cannot bind), one client at
 * a time, one request a line:  SET key size  (a value of size bytes, written, replacing the
 * old one; "OK"), GET key ("size" or "-1"), DEL key ("1" or "0"), PING ("PONG"), STATS
 * ("keys N bytes B").  Every request gets its own reply buffer (malloc/free); the cache is a
 * hash table of malloc'd entries.  SIGTERM ends it with exit 0 (the cache is left as is, as
 * servers do).  crash-under WORD: abort() at the first SET when LD_PRELOAD holds WORD, a server
 * that crashes under one allocator.  Stand-ins for `hctune check`'s test: when a preloaded
 * library defines the symbol cache_server_bloat, the server holds 24 MiB more from the start
 * (a worse allocator); when one defines cache_server_lean, it keeps no value (a better one). */
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUCKETS 4096

struct entry {
    struct entry *next;
    char *key;
    char *value;
    size_t size;
};

static struct entry *table[BUCKETS];
static size_t n_keys, n_bytes;
static volatile sig_atomic_t stop;
static int crash, lean;

static void on_term(int sig) { (void)sig; stop = 1; }

static unsigned hash(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % BUCKETS;
}

static struct entry **find(const char *key)
{
    struct entry **e = &table[hash(key)];
    while (*e && strcmp((*e)->key, key))
        e = &(*e)->next;
    return e;
}

static void del(struct entry **e)
{
    struct entry *x = *e;
    *e = x->next;
    n_keys--;
    n_bytes -= x->size;
    free(x->value);
    free(x->key);
    free(x);
}

/* One request line -> the reply (malloc'd) */
static char *answer(const char *line)
{
    char cmd[16], key[128];
    size_t size = 0;
    char *out = malloc(64);
    if (!out)
        return NULL;
    int n = sscanf(line, "%15s %127s %zu", cmd, key, &size);
    if (n >= 1 && !strcmp(cmd, "PING")) {
        strcpy(out, "PONG\n");
    } else if (n >= 1 && !strcmp(cmd, "STATS")) {
        snprintf(out, 64, "keys %zu bytes %zu\n", n_keys, n_bytes);
    } else if (n == 3 && !strcmp(cmd, "SET") && size <= (64u << 20)) {
        if (crash)
            abort();
        struct entry **e = find(key);
        if (*e)
            del(e);
        struct entry *x = malloc(sizeof *x);
        x->key = strdup(key);
        x->value = malloc(size ? size : 1);
        memset(x->value, 'v', size);
        if (lean) {
            free(x->value);
            x->value = NULL;
        }
        x->size = size;
        x->next = table[hash(key)];
        table[hash(key)] = x;
        n_keys++;
        n_bytes += size;
        strcpy(out, "OK\n");
    } else if (n == 2 && !strcmp(cmd, "GET")) {
        struct entry **e = find(key);
        snprintf(out, 64, "%ld\n", *e ? (long)(*e)->size : -1L);
    } else if (n == 2 && !strcmp(cmd, "DEL")) {
        struct entry **e = find(key);
        strcpy(out, *e ? "1\n" : "0\n");
        if (*e)
            del(e);
    } else {
        strcpy(out, "ERR\n");
    }
    return out;
}

static void serve(int c)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (!stop && buf) {
        ssize_t got = read(c, buf + len, cap - len - 1);
        if (got <= 0)
            break;
        len += (size_t)got;
        buf[len] = 0;
        char *start = buf, *nl;
        while ((nl = strchr(start, '\n'))) {
            *nl = 0;
            char *reply = answer(start);
            if (!reply || write(c, reply, strlen(reply)) < 0) {
                free(reply);
                goto out;
            }
            free(reply);
            start = nl + 1;
        }
        len -= (size_t)(start - buf);
        memmove(buf, start, len);
        if (len + 1 >= cap)
            len = 0;                      /* a line longer than the buffer: dropped */
    }
out:
    free(buf);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: cache_server PORT [crash-under WORD]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    if (argc > 3 && !strcmp(argv[2], "crash-under")) {
        const char *pre = getenv("LD_PRELOAD");
        crash = pre && strstr(pre, argv[3]) != NULL;
    }
    static char *volatile bloat;
    if (dlsym(RTLD_DEFAULT, "cache_server_bloat") && (bloat = malloc(24u << 20)))
        memset(bloat, 'b', 24u << 20);
    lean = dlsym(RTLD_DEFAULT, "cache_server_lean") != NULL;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;           /* no SA_RESTART: accept and read return EINTR */
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 16)) {
        fprintf(stderr, "cache_server: bind 127.0.0.1:%d: %s\n", port, strerror(errno));
        return 1;
    }
    fprintf(stderr, "cache_server: listening on 127.0.0.1:%d\n", port);
    while (!stop) {
        int c = accept(s, NULL, NULL);
        if (c < 0)
            continue;
        serve(c);
        close(c);
    }
    close(s);
    return 0;
}

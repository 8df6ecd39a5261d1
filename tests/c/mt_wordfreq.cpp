// mt_wordfreq: a threaded C++ program that allocates from every thread (std::thread,
// std::string, std::unordered_map, std::vector), for running under HC with LD_PRELOAD.
//
// Usage: mt_wordfreq THREADS WORDS
// Each thread makes WORDS pseudo-random words (seeded by its index), counts them in its own map,
// then hands its map to the main thread, which merges them (so the maps' nodes are freed on a
// thread other than the one that allocated them) and prints the 20 most frequent words and a
// checksum.  The output depends only on the arguments, so any correct allocator prints the same.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

using Counts = std::unordered_map<std::string, long>;

static void count_words(unsigned index, long words, Counts *out)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL * (index + 1);
    Counts local;
    std::vector<std::string> recent;
    for (long k = 0; k < words; k++) {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        uint64_t r = s * 2685821657736338717ULL;
        std::string w;
        unsigned len = 1 + (unsigned)(r % 7) + (unsigned)((r >> 8) % 3 == 0 ? r % 40 : 0);
        for (unsigned i = 0; i < len; i++)
            w.push_back((char)('a' + (r >> (i % 50)) % 6));
        local[w]++;
        recent.push_back(w);           // short-lived strings of many sizes
        if (recent.size() > 64)
            recent.erase(recent.begin(), recent.begin() + 32);
    }
    *out = std::move(local);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        std::fprintf(stderr, "usage: mt_wordfreq THREADS WORDS\n");
        return 2;
    }
    unsigned n = (unsigned)std::atoi(argv[1]);
    long words = std::atol(argv[2]);
    std::vector<Counts> parts(n);
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < n; i++)
        threads.emplace_back(count_words, i, words, &parts[i]);
    for (auto &t : threads)
        t.join();
    Counts all;
    for (auto &p : parts) {
        for (auto &kv : p)
            all[kv.first] += kv.second;
        Counts().swap(p);              // freed here, allocated by the worker
    }
    std::vector<std::pair<std::string, long>> top(all.begin(), all.end());
    std::sort(top.begin(), top.end(), [](const auto &a, const auto &b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    uint64_t sum = 0;
    for (auto &kv : top)
        sum = sum * 31 + (uint64_t)kv.second * kv.first.size();
    for (size_t i = 0; i < top.size() && i < 20; i++)
        std::printf("%s %ld\n", top[i].first.c_str(), top[i].second);
    std::printf("distinct %zu checksum %llu\n", top.size(), (unsigned long long)sum);
    return 0;
}

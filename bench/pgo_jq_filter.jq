[inputs] | group_by(.user) | map({user: .[0].user, n: length, spent: (map(.price) | add), tags: (map(.tags[]) | unique)}) | sort_by(-.spent) | .[0:20]

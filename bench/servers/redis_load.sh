#!/bin/sh
# A phased load for redis-server, run by hctune outside the candidate (redis-benchmark and
# redis-cli from Debian's redis-tools): fill (N SETs of 400 bytes over N keys), overwrite
# (N/2 SETs of 3,000 bytes on random keys), delete (N/2 DELs of random keys), idle (S seconds),
# then a read (N/4 GETs). Prints nothing (the keys are random, so validate compares exit
# statuses only).
#   redis_load.sh PORT [N] [IDLE_S]
set -e
P=$1; N=${2:-100000}; IDLE=${3:-2}
redis-benchmark -p "$P" -q -c 4 -t set -n "$N" -r "$N" -d 400 > /dev/null
redis-benchmark -p "$P" -q -c 4 -t set -n $((N / 2)) -r "$N" -d 3000 > /dev/null
redis-benchmark -p "$P" -q -c 4 -n $((N / 2)) -r "$N" DEL key:__rand_int__ > /dev/null
sleep "$IDLE"
redis-benchmark -p "$P" -q -c 4 -t get -n $((N / 4)) -r "$N" > /dev/null
redis-cli -p "$P" dbsize > /dev/null

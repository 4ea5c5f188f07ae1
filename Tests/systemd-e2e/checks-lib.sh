# Sourced by the check scripts that run inside the booted container: check NAME COMMAND... runs
# the command and records one line of the result file; finish writes the verdict (and, on a
# failure, the output and the journal) as the last lines.
result=/feedd-e2e.result
failures=0
: > "$result"
check() {
    local name=$1
    shift
    if "$@" >> /tmp/check-output 2>&1; then
        echo "ok   $name" >> "$result"
    else
        echo "FAIL $name" >> "$result"
        failures=$((failures + 1))
    fi
}
finish() {
    if [ "$failures" -eq 0 ]; then echo "RESULT: pass" >> "$result"; else
        { echo "--- output"; cat /tmp/check-output; echo "--- journal"; journalctl -b -u feedd.service -o short-monotonic | tail -n 40; } >> "$result"
        echo "RESULT: fail" >> "$result"
    fi
}

#!/bin/bash
# Runs inside the booted container (see run --package), where the Debian package was installed
# with apt before the boot: checks what installing it must give an administrator (SPEC §10).
# Every line of the result file is one check; the last says pass or fail.
set -uo pipefail
source /opt/feedd/checks-lib.sh
socket=/run/feedd/feedd.sock

check "installing the package enabled feedd.socket" bash -c '[ "$(systemctl is-enabled feedd.socket)" = enabled ]'
check "and it is active after the boot" systemctl is-active --quiet feedd.socket
check "the service waits for its first client" bash -c '! systemctl is-active --quiet feedd.service'
check "the unit runs /usr/bin/feedd" bash -c 'systemctl cat feedd.service | grep -qx "ExecStart=/usr/bin/feedd"'
check "the HTTP socket unit ships, disabled" bash -c '[ "$(systemctl is-enabled feedd-http.socket)" = disabled ]'

hello=$(printf 'ping\n' | socat -t 5 - UNIX-CONNECT:$socket)
check "a hello comes through the socket" grep -q '"type":"hello","name":"feedd"' <<< "$hello"
check "listing the conffile's feeds" grep -q '"feeds":\["donny","everything","sample","users"\]' <<< "$hello"
check "the service is active" systemctl is-active --quiet feedd.service

check "feedctl status works" bash -c 'feedctl status | grep -q "^sample  *file  *ok"'
check "the sample feed reads /usr/share/feedd" bash -c 'feedctl next sample 1 | grep -q "\"name\":\"Hydrogen\""'
# With no network in the container, the users feed fails and retries: a record about it.
timeout 5 feedctl next users > /dev/null 2>&1
metrics=$(feedctl metrics)
check "feedctl metrics works" grep -q '^feedd_feed_pages_delivered_total{feed="sample"} 1$' <<< "$metrics"
check "and counts the upstream errors" grep -Eq '^feedd_feed_upstream_errors_total\{feed="users"\} [1-9]' <<< "$metrics"
check "the metrics end with # EOF" bash -c '[ "$(tail -n 1 <<< "$1")" = "# EOF" ]' _ "$metrics"

check "journal records carry FEEDD_FEED" bash -c 'journalctl -b -u feedd.service FEEDD_FEED=sample -o cat | grep -q "feed sample (file) ready"'
check "journalctl -u feedd FEEDD_FEED=users finds the upstream trouble" bash -c 'journalctl -b -u feedd FEEDD_FEED=users -p warning -o cat | grep -q "feed users: page 1: "'
check "client records carry FEEDD_PEER_PID and FEEDD_PEER_UID" bash -c 'journalctl -b -u feedd.service FEEDD_PEER_UID=0 -o verbose | grep -q "FEEDD_PEER_PID="'
check "records keep their priority" bash -c 'journalctl -b -u feedd.service -p 6..6 -o cat | grep -q "listening on the socket passed by systemd"'

check "/etc/feedd/feedd.toml is a conffile" bash -c 'dpkg-query -W -f="\${Conffiles}" feedd | grep -q "/etc/feedd/feedd.toml "'
check "feedd check-config accepts it" feedd check-config
check "the man pages are installed" test -f /usr/share/man/man8/feedd.8.gz -a -f /usr/share/man/man1/feedctl.1.gz -a -f /usr/share/man/man5/feedd.toml.5.gz
check "the bash completion is installed" test -f /usr/share/bash-completion/completions/feedctl
check "the example plugin is installed" test -x /usr/lib/feedd/plugins/json-dir

finish

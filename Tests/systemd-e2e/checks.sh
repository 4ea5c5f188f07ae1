#!/bin/bash
# Runs inside the booted container (see run): installs feedd as the README says and checks what
# systemd sees. Every line of the result file is one check; the last says pass or fail.
set -uo pipefail
source /opt/feedd/checks-lib.sh
socket=/run/feedd/feedd.sock

# The README's install command, as an administrator runs it.
cd /opt/feedd
install -m 0755 feedd feedctl /usr/local/bin/ \
    && install -m 0644 systemd/feedd.service systemd/feedd.socket /etc/systemd/system/ \
    && systemctl daemon-reload && systemctl enable --now feedd.socket
check "the install command enabled the socket" systemctl is-active --quiet feedd.socket

# Socket activation: nothing runs until a client connects.
check "the service is inactive before anyone connects" bash -c '! systemctl is-active --quiet feedd.service'
hello=$(printf 'ping\n' | socat -t 5 - UNIX-CONNECT:$socket)
check "connecting starts feedd and gets hello" grep -q '"type":"hello"' <<< "$hello"
check "and the ping is answered" grep -q '"type":"pong"' <<< "$hello"
check "the service is active" systemctl is-active --quiet feedd.service
check "systemctl status shows the daemon's STATUS" bash -c 'systemctl status feedd.service | grep -q "Status: \"4 feeds, "'

# Reload: a subscriber on an open connection carries on.
coproc SUBSCRIBER { socat - UNIX-CONNECT:$socket; }
read -r -t 10 line <&"${SUBSCRIBER[0]}"   # hello
echo "next sample" >&"${SUBSCRIBER[1]}"
read -r -t 10 subscribed <&"${SUBSCRIBER[0]}"
read -r -t 10 first <&"${SUBSCRIBER[0]}"
check "the subscriber got page 1" grep -q '"page":1,' <<< "$first"
check "systemctl reload succeeds" systemctl reload feedd.service
echo "next sample" >&"${SUBSCRIBER[1]}"
read -r -t 10 second <&"${SUBSCRIBER[0]}"
check "the subscriber carries on after the reload" grep -q '"page":2,' <<< "$second"
check "the reload is in the journal" bash -c 'journalctl -b -u feedd.service | grep -q "configuration reloaded"'

# Watchdog: with WatchdogSec=2s, the service stays up across several periods.
mkdir -p /etc/systemd/system/feedd.service.d
printf '[Service]\nWatchdogSec=2s\n' > /etc/systemd/system/feedd.service.d/watchdog.conf
systemctl daemon-reload
echo "quit" >&"${SUBSCRIBER[1]}"
systemctl restart feedd.service
started=$(systemctl show -p ExecMainStartTimestampMonotonic --value feedd.service)
sleep 7
check "the watchdog is armed" bash -c '[ "$(systemctl show -p WatchdogUSec --value feedd.service)" = "2s" ]'
check "the service stays active past several watchdog periods" systemctl is-active --quiet feedd.service
check "and was never restarted" bash -c "[ \"\$(systemctl show -p ExecMainStartTimestampMonotonic --value feedd.service)\" = \"$started\" ]"

# Stop, then the socket activates it again (the socket must survive the stop).
systemctl stop feedd.service
check "stop ends with Result=success" bash -c '[ "$(systemctl show -p Result --value feedd.service)" = "success" ]'
check "the socket file survives the stop" test -S $socket
again=$(printf 'ping\n' | socat -t 5 - UNIX-CONNECT:$socket)
check "the socket activates the service again" grep -q '"type":"pong"' <<< "$again"
check "the service is active again" systemctl is-active --quiet feedd.service

# The journal holds the daemon's lines with their priorities.
check "journald has the daemon's lines" bash -c 'journalctl -b -u feedd.service -o cat | grep -q "listening on the socket passed by systemd"'
check "info lines are priority 6" bash -c 'journalctl -b -u feedd.service -p 6..6 -o cat | grep -q "listening on the socket passed by systemd"'
check "notice lines are priority 5" bash -c 'journalctl -b -u feedd.service -p 5..5 -o cat | grep -q "stopped"'

# The HTTP front on a socket unit of its own (the README's optional step): the service, started
# by a connection to it, gets both sockets and tells them apart by FileDescriptorName=http.
systemctl stop feedd.service
install -m 0644 systemd/feedd-http.socket /etc/systemd/system/ && systemctl daemon-reload && systemctl enable --now feedd-http.socket
check "the HTTP socket is active" systemctl is-active --quiet feedd-http.socket
health=$(printf 'GET /healthz HTTP/1.0\r\n\r\n' | socat -t 5 - TCP:127.0.0.1:8080)
check "an HTTP request starts feedd and is answered" grep -q '"status":"ok"' <<< "$health"
check "the HTTP front serves the socket systemd passed" bash -c 'journalctl -b -u feedd.service -o cat | grep -q "HTTP listening on the socket passed by systemd"'
pong=$(printf 'ping\n' | socat -t 5 - UNIX-CONNECT:$socket)
check "and the protocol socket still answers" grep -q '"type":"pong"' <<< "$pong"

finish

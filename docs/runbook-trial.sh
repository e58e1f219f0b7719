#!/usr/bin/env bash
# runbook-trial.sh: follows docs/operations.md's secured-cluster and restore
# procedures on three etcd processes on loopback (TLS on client and peer
# connections, client certificates required, auth on), running the doc's
# own code blocks. The only changes to them: the doc's address and data
# variables set to loopback values, the loopback SAN note applied, each
# member's etcd line run for etcd-1..3 ("likewise"), and etcdctl's password
# prompts answered the way the doc gives (--interactive=false).
#
#   mkdir -p /tmp/etcd-bin && cd /tmp/etcd-bin && go mod init trial && \
#     go get go.etcd.io/etcd/server/v3@v3.7.3 go.etcd.io/etcd/etcdctl/v3@v3.7.3 go.etcd.io/etcd/etcdutl/v3@v3.7.3 && \
#     go build -o etcd go.etcd.io/etcd/server/v3 && go build -o etcdctl go.etcd.io/etcd/etcdctl/v3 && \
#     go build -o etcdutl go.etcd.io/etcd/etcdutl/v3
#   make build && BIN=/tmp/etcd-bin docs/runbook-trial.sh
#
# At its end it freezes each member in turn (and the leader) for 14 s under
# a `leasegate run --ttl 10s` (issue 13's hung member).
#
# It needs openssl, jq and bc, and the loopback addresses 127.0.0.21-23 free
# on ports 2379 and 2380. It stops the members it started when it ends.
set -u
DOC=$(cd "$(dirname "$0")" && pwd)/operations.md
LEASEGATE_BIN=$(cd "$(dirname "$0")/.." && pwd)/bin
WORK=$(mktemp -d /tmp/lg-runbook-trial.XXXXXX)
cd "$WORK"
python3 - "$DOC" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
def blocks(start, end):
    i, j = s.index(start), s.index(end)
    return ['\n'.join(l[3:] if l.startswith('   ') else l for l in b.split('\n'))
            for b in re.findall(r'```(?:sh|bash)\n(.*?)```', s[i:j], re.S)]
for n, b in enumerate(blocks('## Secured clusters', '## Claiming and committing')):
    open(f's{n+1}.sh', 'w').write(b)
for n, b in enumerate(blocks('## Restoring etcd from a snapshot', '## External effects')):
    open(f'r{n+1}.sh', 'w').write(b)
PY
export PATH=${BIN:?BIN: the directory of etcd, etcdctl and etcdutl}:$LEASEGATE_BIN:$PATH
T0=$(date +%s.%N)
step() { printf '[%6.2fs] %s\n' "$(echo "$(date +%s.%N) - $T0" | bc)" "$*"; }
# Block 1, the doc's variables set for loopback; the loopback SAN note applied.
sed -e "1s#.*#M1=127.0.0.21 M2=127.0.0.22 M3=127.0.0.23 DATA=$WORK/data#" \
    -e 's#subjectAltName=IP:\$M\([123]\)#subjectAltName=IP:$M\1,IP:127.0.0.1#' s1.sh > x1.sh
export M1=127.0.0.21 M2=127.0.0.22 M3=127.0.0.23 DATA=$WORK/data
bash -e x1.sh > x1.log 2>&1; step "block 1 certificates: exit $?"
mkdir -p $DATA
for i in 1 2 3; do head -1 s2.sh > m$i.sh; tail -n +2 s2.sh | sed -e "s/etcd-1/etcd-$i/g; s/\\\$M1/\\\$M$i/g" >> m$i.sh; setsid nohup bash m$i.sh > etcd-$i.log 2>&1 < /dev/null & done
step "block 2 members started"
# Block 3, prompts answered as the doc says (--interactive=false reads stdin).
sed -e 's#^etcdctl user add root .*#echo root-pw-2 | etcdctl user add root --interactive=false#' -e 's#ETCDCTL_PASSWORD=…#ETCDCTL_PASSWORD=root-pw-2#' s3.sh > x3.sh
head -2 x3.sh > x3env.sh; . ./x3env.sh
for n in $(seq 1 100); do etcdctl endpoint health >/dev/null 2>&1 && break; sleep 0.1; done
step "cluster healthy"
bash -e x3.sh > x3.log 2>&1; step "block 3 root and auth enable: exit $?"; cat x3.log
sed -e 's#^etcdctl user add leasegate .*#echo lg-pw-2 | etcdctl user add leasegate --interactive=false#' s4.sh > x4.sh
(export ETCDCTL_USER=root ETCDCTL_PASSWORD=root-pw-2; bash -e x4.sh > x4.log 2>&1); step "block 4 role and user: exit $?"; cat x4.log
sed -e 's#LEASEGATE_PASSWORD=…#LEASEGATE_PASSWORD=lg-pw-2#' s5.sh > x5.sh
bash -e x5.sh > x5.log 2>&1; step "block 5 leasegate as the least-privilege user: exit $?"; cat x5.log
# Restore procedure. Setup: w1 holds a task at snapshot time.
export ETCDCTL_USER=root ETCDCTL_PASSWORD=root-pw-2
export LEASEGATE_ENDPOINTS=$ETCDCTL_ENDPOINTS LEASEGATE_USER=leasegate LEASEGATE_PASSWORD=lg-pw-2
lg() { leasegate --cacert ca.pem --cert leasegate.pem --key leasegate-key.pem "$@"; }
lg -o json claim --tenant acme --task failover --owner w1 --ttl 600s > g1.json
bash -e r1.sh > r1.log 2>&1; step "restore 1 snapshot save: exit $?"; grep -v '"level"' r1.log
lg lease revoke --grant g1.json > /dev/null; lg -o json claim --tenant acme --task failover --owner w2 --ttl 600s > g2.json
step "after the snapshot: w1 revoked, w2 holds epoch $(jq .grant.epoch g2.json)"
for i in 1 2 3; do kill $(pgrep -f -- "--name etcd-$i --data-dir $DATA/etcd-$i"); done
for n in $(seq 1 100); do pgrep -f -- "--data-dir $DATA/" >/dev/null || break; sleep 0.1; done
step "restore 2 every member stopped"
bash -e r2.sh > r2.log 2>&1; step "restore 3 every member restored: exit $?"
for i in 1 2 3; do setsid nohup bash m$i.sh > etcd-r-$i.log 2>&1 < /dev/null & done
for n in $(seq 1 100); do etcdctl endpoint health >/dev/null 2>&1 && break; sleep 0.1; done
step "restore 4 members started on the restored data: $(etcdctl endpoint health 2>&1 | grep -c 'is healthy') healthy"
sed 's/^leasegate /lg /' r3.sh > x6.sh; . ./x6.sh > x6.log 2>&1; step "restore 4 realm show / rotate / show: exit $?"; cat x6.log
lg lease list; lg lease revoke --grant g1.json; step "restore 5 revoke the restored lease of w1: exit $?"
lg -o json commit --grant g2.json --operation op-x --value v --expected-version 0 > /dev/null 2>&1; step "w2's grant from before the restore: exit $? (1 expected)"
step "new claim epoch: $(lg -o json claim --tenant acme --task failover --owner w3 --ttl 60s | jq .grant.epoch) (was $(jq .grant.epoch g2.json))"
etcdctl endpoint status -w fields | grep -E 'ClusterID' | sort -u
# Issue 13's hung member: `leasegate run --ttl 10s` as the least-privilege
# user while one member is frozen (SIGSTOP) for 14 s, members 1-3 and then
# the leader; the run must end with its child's exit 0, not 5 (lost). A
# binary without WithClientConfig (fa27ed8) passed these 4 of 4 as well:
# with one member of three hung, the client's own re-login finds a healthy
# member often enough. The discriminating test is the embedded
# TestSessionSurvivesHungMembersSecured (two of three stalled).
leader() { etcdctl endpoint status -w json 2>/dev/null | jq -r '.[] | select(.Status.header.member_id == .Status.leader) | .Endpoint' | sed -E 's#.*127\.0\.0\.2([123]).*#\1#'; }
for k in 1 2 3 L; do
  m=$k; [ "$k" = L ] && m=$(leader)
  lg run --tenant acme --task hung-$k --owner w-hung --ttl 10s -- sleep 20 > run-$k.log 2>&1 & rp=$!
  sleep 2; pid=$(pgrep -f -- "--name etcd-$m --data-dir $DATA/etcd-$m")
  kill -STOP $pid; sleep 14; kill -CONT $pid
  wait $rp; step "hung member etcd-$m (try $k) for 14 s under run --ttl 10s: exit $? (0 expected)"
done
for p in $(pgrep -f -- "--data-dir $DATA/"); do kill $p; done
step "done; logs and files in $WORK"

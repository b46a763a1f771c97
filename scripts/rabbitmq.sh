#!/usr/bin/env bash
# A private RabbitMQ broker (STOMP + web-STOMP) for the event tests, on 127.0.0.1 only.
#
#   scripts/rabbitmq.sh install                 install Debian's rabbitmq-server, distro service off
#   scripts/rabbitmq.sh start DIR               start a broker whose whole state lives in DIR
#   scripts/rabbitmq.sh stop DIR                stop it (and its private epmd)
#   scripts/rabbitmq.sh status DIR              exit 0 when it runs; prints DIR/broker.env
#   scripts/rabbitmq.sh provision DIR VHOST USER PASSWORD QUEUE
#                                               vhost, user (read-only on QUEUE), durable QUEUE
#   scripts/rabbitmq.sh declare-queue DIR VHOST QUEUE
#   scripts/rabbitmq.sh delete-queue DIR VHOST QUEUE
#   scripts/rabbitmq.sh ctl DIR ARGS...         rabbitmqctl against the broker in DIR
#
# Ports: RABBITMQ_STOMP_PORT, RABBITMQ_WEB_STOMP_PORT, RABBITMQ_WEB_STOMP_TLS_PORT,
# RABBITMQ_DIST_PORT, ERL_EPMD_PORT (each a free port when unset). The first start writes
# them to DIR/broker.env and later starts of the same DIR reuse them, so clients reconnect
# to the same address after a restart. web-STOMP over TLS is served when
# RABBITMQ_TLS_CERT, RABBITMQ_TLS_KEY and RABBITMQ_TLS_CA name PEM files. AMQP is off.
# The administrator (RABBITMQ_ADMIN_USER/RABBITMQ_ADMIN_PASSWORD, default
# waldur-sim/waldur-sim) is what the Waldur simulator publishes with.
set -euo pipefail

RABBITMQ_BIN=${RABBITMQ_BIN:-/usr/lib/rabbitmq/bin}
WS_PATH=/rmqws-stomp

die() { echo "rabbitmq.sh: $*" >&2; exit 1; }

install_broker() {
  if [ -x "$RABBITMQ_BIN/rabbitmq-server" ]; then
    return 0
  fi
  [ "$(id -u)" = 0 ] || die "rabbitmq-server is not installed and installing it needs root"
  # Keep the distro service from starting during the install: it would listen on 0.0.0.0.
  local policy=/usr/sbin/policy-rc.d made_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    made_policy=1
  fi
  local status=0
  {
    apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rabbitmq-server
  } > /tmp/rabbitmq-install.log 2>&1 || status=$?
  [ -n "$made_policy" ] && rm -f "$policy"
  [ "$status" = 0 ] || { cat /tmp/rabbitmq-install.log >&2; die "apt-get install rabbitmq-server failed"; }
  stop_distro_service
}

stop_distro_service() {
  # Best effort, after our install: whichever init system is there, the distro broker must
  # neither run now nor start at boot (it would listen on every interface).
  if command -v systemctl > /dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl disable --now rabbitmq-server > /dev/null 2>&1 || true
  elif [ -x /etc/init.d/rabbitmq-server ]; then
    if pgrep -u rabbitmq -f beam > /dev/null 2>&1; then
      /etc/init.d/rabbitmq-server stop > /dev/null 2>&1 || true
    fi
    update-rc.d rabbitmq-server disable > /dev/null 2>&1 || true
  fi
}

# RabbitMQ definitions (users, vhosts, permissions, queues) as JSON, from lines of
#   user NAME PASSWORD TAGS | vhost NAME | permit VHOST USER CONFIGURE WRITE READ | queue VHOST NAME
# Passwords are stored as rabbit_password_hashing_sha256 hashes, as the broker keeps them.
definitions() {
  python3 -c '
import base64, hashlib, json, os, sys
out = {"users": [], "vhosts": [], "permissions": [], "queues": []}
for line in sys.stdin:
    kind, *rest = line.split()
    if kind == "user":
        name, password, tags = rest[0], rest[1], rest[2] if len(rest) > 2 else ""
        salt = os.urandom(4)
        digest = base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()
        out["users"].append({"name": name, "password_hash": digest, "tags": tags,
                             "hashing_algorithm": "rabbit_password_hashing_sha256"})
    elif kind == "vhost":
        out["vhosts"].append({"name": rest[0]})
    elif kind == "permit":
        vhost, user, configure, write, read = rest
        out["permissions"].append({"vhost": vhost, "user": user, "configure": configure, "write": write,
                                   "read": read})
    elif kind == "queue":
        out["queues"].append({"vhost": rest[0], "name": rest[1], "durable": True, "auto_delete": False,
                              "arguments": {}})
json.dump(out, sys.stdout)
'
}

# Import definitions read from stdin (one CLI call, however much it sets up).
import_definitions() {
  local file
  file=$(mktemp "$DIR/definitions.XXXXXX")
  definitions > "$file"
  ctl import_definitions "$file" > /dev/null
  rm -f "$file"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Environment of every server and CLI invocation for the broker in $DIR.
broker_env() {
  DIR=$(cd "$1" && pwd)
  [ -f "$DIR/broker.env" ] || die "no broker.env in $DIR (start it first)"
  # shellcheck disable=SC1091
  . "$DIR/broker.env"
  export HOME="$DIR"   # the Erlang cookie lives here, shared by server and CLI
  export RABBITMQ_NODENAME RABBITMQ_USE_LONGNAME=false
  export RABBITMQ_BASE="$DIR" RABBITMQ_MNESIA_BASE="$DIR/mnesia" RABBITMQ_LOG_BASE="$DIR/log"
  export RABBITMQ_CONFIG_FILE="$DIR/rabbitmq.conf" RABBITMQ_ADVANCED_CONFIG_FILE="$DIR/advanced.config"
  export RABBITMQ_CONF_ENV_FILE="$DIR/rabbitmq-env.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$DIR/enabled_plugins"
  export RABBITMQ_PID_FILE="$DIR/rabbitmq.pid" RABBITMQ_DIST_PORT
  export ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT
  # CLI nodes also open a distribution listener: keep it on loopback too.
  export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  # Two shared cores: no busy-waiting schedulers.
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+sbwt none +sbwtdcpu none +sbwtdio none -kernel inet_dist_use_interface {127,0,0,1}"
}

ctl() {
  "$RABBITMQ_BIN/rabbitmqctl" -q -n "$RABBITMQ_NODENAME" "$@"
}

write_config() {
  local tls=""
  if [ -n "${RABBITMQ_TLS_CERT:-}" ] && [ -n "${RABBITMQ_TLS_KEY:-}" ] && [ -n "${RABBITMQ_TLS_CA:-}" ]; then
    tls=1
  fi
  cat > "$DIR/rabbitmq.conf" <<EOF
listeners.tcp = none
stomp.listeners.tcp.1 = 127.0.0.1:$RABBITMQ_STOMP_PORT
web_stomp.tcp.ip = 127.0.0.1
web_stomp.tcp.port = $RABBITMQ_WEB_STOMP_PORT
web_stomp.ws_path = $WS_PATH
distribution.listener.interface = 127.0.0.1
distribution.listener.port_range.min = $RABBITMQ_DIST_PORT
distribution.listener.port_range.max = $RABBITMQ_DIST_PORT
log.console = false
log.file.level = info
disk_free_limit.absolute = 10MB
load_definitions = $DIR/boot-definitions.json
EOF
  # The administrator the simulator publishes with, there from the first boot.
  printf 'user %s %s administrator\nvhost /\npermit / %s .* .* .*\n' \
    "$RABBITMQ_ADMIN_USER" "$RABBITMQ_ADMIN_PASSWORD" "$RABBITMQ_ADMIN_USER" | definitions > "$DIR/boot-definitions.json"
  if [ -n "$tls" ]; then
    cat >> "$DIR/rabbitmq.conf" <<EOF
web_stomp.ssl.ip = 127.0.0.1
web_stomp.ssl.port = $RABBITMQ_WEB_STOMP_TLS_PORT
web_stomp.ssl.certfile = $RABBITMQ_TLS_CERT
web_stomp.ssl.keyfile = $RABBITMQ_TLS_KEY
web_stomp.ssl.cacertfile = $RABBITMQ_TLS_CA
EOF
  fi
  echo '[rabbitmq_stomp,rabbitmq_web_stomp].' > "$DIR/enabled_plugins"
  : > "$DIR/rabbitmq-env.conf"   # not /etc/rabbitmq/rabbitmq-env.conf
}

is_running() {
  [ -f "$RABBITMQ_PID_FILE" ] && kill -0 "$(cat "$RABBITMQ_PID_FILE")" 2> /dev/null
}

start_broker() {
  local dir=$1
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ ! -f "$dir/broker.env" ]; then
    local node
    node="waldur-sim-$(basename "$dir" | tr -c 'a-zA-Z0-9_\n-' '-')-$$@localhost"
    cat > "$dir/broker.env" <<EOF
RABBITMQ_NODENAME=$node
RABBITMQ_STOMP_PORT=${RABBITMQ_STOMP_PORT:-$(free_port)}
RABBITMQ_WEB_STOMP_PORT=${RABBITMQ_WEB_STOMP_PORT:-$(free_port)}
RABBITMQ_WEB_STOMP_TLS_PORT=${RABBITMQ_WEB_STOMP_TLS_PORT:-$(free_port)}
RABBITMQ_DIST_PORT=${RABBITMQ_DIST_PORT:-$(free_port)}
ERL_EPMD_PORT=${ERL_EPMD_PORT:-$(free_port)}
RABBITMQ_ADMIN_USER=${RABBITMQ_ADMIN_USER:-waldur-sim}
RABBITMQ_ADMIN_PASSWORD=${RABBITMQ_ADMIN_PASSWORD:-waldur-sim}
RABBITMQ_WEB_STOMP_PATH=$WS_PATH
EOF
  fi
  broker_env "$dir"
  if is_running; then
    return 0
  fi
  mkdir -p "$DIR/mnesia" "$DIR/log"
  write_config
  # setsid: the broker outlives this script and is not in the caller's process group.
  setsid "$RABBITMQ_BIN/rabbitmq-server" > "$DIR/log/startup.log" 2>&1 < /dev/null &
  echo $! > "$DIR/launcher.pid"
  if ! "$RABBITMQ_BIN/rabbitmqctl" -q -n "$RABBITMQ_NODENAME" wait --timeout 90 "$RABBITMQ_PID_FILE" > /dev/null 2>&1; then
    tail -n 40 "$DIR/log/startup.log" >&2 || true
    die "the broker in $DIR did not start (logs in $DIR/log)"
  fi
  wait_port "$RABBITMQ_STOMP_PORT"
  wait_port "$RABBITMQ_WEB_STOMP_PORT"
}

wait_port() {
  local port=$1 tries=0
  until python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 1).close()" 2> /dev/null; do
    tries=$((tries + 1))
    [ "$tries" -lt 100 ] || die "port $port did not open"
    sleep 0.1
  done
}

stop_broker() {
  broker_env "$1"
  if is_running; then
    local pid
    pid=$(cat "$RABBITMQ_PID_FILE")
    ctl shutdown > /dev/null 2>&1 || kill "$pid" 2> /dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2> /dev/null; then
      kill -9 "$pid" 2> /dev/null || true
    fi
  fi
  rm -f "$RABBITMQ_PID_FILE"
  # The epmd that the broker's Erlang VM started on our private port.
  if command -v epmd > /dev/null 2>&1; then
    epmd -port "$ERL_EPMD_PORT" -kill > /dev/null 2>&1 || true
  fi
}

status_broker() {
  broker_env "$1"
  cat "$DIR/broker.env"
  is_running && ctl status > /dev/null 2>&1
}

# A durable, non-auto-delete classic queue, as Waldur pre-declares consumer queues.
declare_queue() {
  printf 'queue %s %s\n' "$1" "$2" | import_definitions
}

delete_queue() {
  local vhost=$1 queue=$2
  ctl delete_queue -p "$vhost" "$queue" > /dev/null 2>&1 || true
}

# One import: the vhost, the consumer user with read (consume, ack) on its own queue only
# (the agent must never need to declare), the administrator's access, the durable queue.
provision() {
  local vhost=$1 user=$2 password=$3 queue=$4
  printf 'vhost %s\nuser %s %s\npermit %s %s ^$ ^$ ^%s$\npermit %s %s .* .* .*\nqueue %s %s\n' \
    "$vhost" "$user" "$password" "$vhost" "$user" "$queue" "$vhost" "$RABBITMQ_ADMIN_USER" "$vhost" "$queue" |
    import_definitions
}

command=${1:-}
case "$command" in
  install) install_broker ;;
  start) [ $# -eq 2 ] || die "usage: $0 start DIR"; install_broker; start_broker "$2" ;;
  stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; stop_broker "$2" ;;
  status) [ $# -eq 2 ] || die "usage: $0 status DIR"; status_broker "$2" ;;
  provision) [ $# -eq 6 ] || die "usage: $0 provision DIR VHOST USER PASSWORD QUEUE"
    broker_env "$2"; provision "$3" "$4" "$5" "$6" ;;
  declare-queue) [ $# -eq 4 ] || die "usage: $0 declare-queue DIR VHOST QUEUE"
    broker_env "$2"; declare_queue "$3" "$4" ;;
  delete-queue) [ $# -eq 4 ] || die "usage: $0 delete-queue DIR VHOST QUEUE"
    broker_env "$2"; delete_queue "$3" "$4" ;;
  ctl) [ $# -ge 2 ] || die "usage: $0 ctl DIR ARGS..."; dir=$2; shift 2; broker_env "$dir"; ctl "$@" ;;
  *) die "usage: $0 install | start DIR | stop DIR | status DIR | provision DIR VHOST USER PASSWORD QUEUE | declare-queue DIR VHOST QUEUE | delete-queue DIR VHOST QUEUE | ctl DIR ARGS..." ;;
esac

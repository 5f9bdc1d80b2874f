#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for bench/chat.mjs's PostgresSaver:
#   bench/pg.sh start DIR   installs PostgreSQL from Debian's packages when
#                           initdb is missing (apt-get, as root), makes a
#                           cluster in DIR/pg owned by an unprivileged user
#                           (postgres, or nobody; a cluster there already is
#                           started as it is), starts it on a Unix socket
#                           in DIR (no TCP) and prints its connection string
#   bench/pg.sh stop DIR    stops it (DIR is the caller's to remove)
# The cluster keeps PostgreSQL's defaults (fsync on, synchronous_commit on,
# full_page_writes on): the same durability as the other savers.
set -euo pipefail
cmd=${1:?usage: pg.sh start|stop DIR}
dir=$(cd "${2:?usage: pg.sh start|stop DIR}" && pwd)

bindir() {
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  done
  return 1
}

if ! bin=$(bindir); then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
    echo "pg.sh: PostgreSQL is not installed and apt-get is not usable here (root: $(id -u))" >&2
    exit 3
  fi
  echo "pg.sh: installing PostgreSQL from Debian's packages" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
  bin=$(bindir)
fi

user=$(id -un)
if [ "$(id -u)" = 0 ]; then
  if id postgres > /dev/null 2>&1; then user=postgres; else user=nobody; fi
fi
as() {
  if [ "$(id -un)" = "$user" ]; then "$@"; else runuser -u "$user" -- "$@"; fi
}

case "$cmd" in
start)
  mkdir -p "$dir/pg"
  if [ "$(id -un)" != "$user" ]; then
    # the cluster's user must reach DIR: a directory above it that it
    # cannot search (mktemp -d makes them 0700) is opened to search (o+x)
    d=$dir
    while [ "$d" != / ]; do
      d=$(dirname "$d")
      if ! runuser -u "$user" -- test -x "$d"; then
        echo "pg.sh: chmod o+x $d (for $user)" >&2
        chmod o+x "$d"
      fi
    done
  fi
  chown "$user" "$dir" "$dir/pg"
  chmod 700 "$dir/pg"
  if [ ! -f "$dir/pg/PG_VERSION" ]; then
    as "$bin/initdb" -D "$dir/pg" -U postgres -A trust --no-sync -E UTF8 > "$dir/pg-initdb.log"
  fi
  as "$bin/pg_ctl" -D "$dir/pg" -l "$dir/pg.log" -w -t 120 \
    -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c port=5432" start > /dev/null
  echo "postgresql://postgres@/postgres?host=$dir&port=5432"
  ;;
stop)
  as "$bin/pg_ctl" -D "$dir/pg" -m fast -w stop > /dev/null
  ;;
*)
  echo "usage: pg.sh start|stop DIR" >&2
  exit 2
  ;;
esac

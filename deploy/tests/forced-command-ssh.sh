#!/bin/sh
# Stands in for `ssh` in tests of deploy/pull-candidates.sh (RSYNC_RSH=this): runs what sshd
# would for an authorized_keys line `command="rrsync -ro DIR",restrict ...`, with DIR from
# $FORCED_RRSYNC_DIR and the client's command in SSH_ORIGINAL_COMMAND, so the read-only,
# one-directory restriction under test is rrsync's own.
#
#   RSYNC_RSH=deploy/tests/forced-command-ssh.sh rsync ... host:file dest
set -eu
: "${FORCED_RRSYNC_DIR:?set FORCED_RRSYNC_DIR to the directory the forced command serves}"
# rsync calls: RSH [ssh options] HOST COMMAND...
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] && shift
SSH_ORIGINAL_COMMAND="$*"
export SSH_ORIGINAL_COMMAND
exec rrsync -ro "$FORCED_RRSYNC_DIR"

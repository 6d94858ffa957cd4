//! A guard process that cleans up a cluster when the test process dies without
//! dropping it.
//!
//! `Drop` is not enough on its own: the cluster shared by a test binary lives in a
//! `static`, and statics are never dropped; a test process can also be killed. Linux
//! could kill children with their parent (`PR_SET_PDEATHSIG`), but only through
//! `unsafe` code, which this workspace forbids. So each cluster starts a small `sh`
//! script that blocks reading a pipe whose only writer is the test process. When the
//! test process exits for any reason the kernel closes that pipe, `read` sees end of
//! file, and the script stops every pid listed in `<base>/pids` (SIGTERM, then SIGKILL
//! after 3 s), runs every `<base>/cleanup.d/*.sh` (a real node's restore of host
//! state, see [`crate::real_node`]) and removes the base directory (unless asked to
//! keep it).
//!
//! The script runs in its own process group and ignores SIGINT/SIGHUP/SIGTERM so that
//! Ctrl-C on `cargo test` (which signals the whole foreground group) does not take it
//! down before it has cleaned up. An orderly `Drop` of the cluster SIGKILLs it first.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::Error;

/// `$1`: the cluster's base directory; `$2`: `keep` to leave it in place.
///
/// A pid counts as alive while `/proc/<pid>` exists and is not a zombie: orphaned
/// components are reparented to whatever reaps them, which may be slow or never.
const SCRIPT: &str = r#"
trap '' HUP INT TERM
while read -r _; do :; done
pids=$(cat "$1/pids" 2>/dev/null)
alive() { [ -d "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
[ -n "$pids" ] && kill -TERM $pids 2>/dev/null
n=0
while [ -n "$pids" ] && [ $n -lt 30 ]; do
  left=
  for p in $pids; do alive "$p" && left="$left $p"; done
  pids=$left
  [ -n "$pids" ] && sleep 0.1
  n=$((n + 1))
done
[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
for f in "$1"/cleanup.d/*.sh; do [ -f "$f" ] && sh "$f"; done
[ "$2" = keep ] || rm -rf "$1"
"#;

/// The running watchdog of one cluster. Holding it keeps the pipe open.
pub(crate) struct Watchdog {
    child: Child,
}

impl Watchdog {
    /// Starts the watchdog for the cluster in `base`.
    pub fn start(base: &Path, keep_dir: bool) -> Result<Self, Error> {
        let child = Command::new("sh")
            .args(["-c", SCRIPT, "tas-testcluster-watchdog"])
            .arg(base)
            .arg(if keep_dir { "keep" } else { "remove" })
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(Error::io("starting the cluster watchdog (sh)"))?;
        Ok(Self { child })
    }

    /// The watchdog's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends the watchdog without letting it clean up: the caller does that itself.
    pub fn disarm(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

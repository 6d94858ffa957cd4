//! Who this process is, in Leases, Events and logs: the one answer every TAS binary
//! gives. In a pod that is the pod name, passed by the downward API as `$POD_NAME`;
//! without it, the host name (which the container runtime sets to the pod name too).

use std::path::Path;

/// The environment variable the downward API fills with the pod name.
pub const POD_NAME_ENV: &str = "POD_NAME";

/// Where Linux publishes the host name.
const HOSTNAME_FILE: &str = "/proc/sys/kernel/hostname";

/// This process's identity: `explicit` (a flag) if given, else `$POD_NAME`, else the
/// host name, else `tas-<pid>`. Empty values count as unset.
pub fn identity(explicit: Option<&str>) -> String {
    choose([
        explicit.map(str::to_owned),
        std::env::var(POD_NAME_ENV).ok(),
        hostname(),
        Some(format!("tas-{}", std::process::id())),
    ])
}

/// The host name from the kernel, or `$HOSTNAME` where `/proc` is not mounted.
fn hostname() -> Option<String> {
    std::fs::read_to_string(Path::new(HOSTNAME_FILE))
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
}

/// The first candidate that is not blank, trimmed.
fn choose(candidates: impl IntoIterator<Item = Option<String>>) -> String {
    candidates
        .into_iter()
        .flatten()
        .map(|c| c.trim().to_owned())
        .find(|c| !c.is_empty())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_non_blank_source_wins() {
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(choose([some("flag"), some("pod"), some("host")]), "flag");
        assert_eq!(choose([None, some("pod-7f9c"), some("host")]), "pod-7f9c");
        assert_eq!(choose([some(""), some(" "), some("host\n")]), "host");
        assert_eq!(choose([None, None]), "");
    }

    #[test]
    fn an_explicit_identity_is_used_as_given() {
        assert_eq!(identity(Some("replica-a")), "replica-a");
        assert!(!identity(None).is_empty());
    }
}

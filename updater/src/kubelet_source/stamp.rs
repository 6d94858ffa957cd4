//! Noticing that the kubelet's configuration changed on disk, without waiting for the
//! next periodic publish: a cheap stamp (size, modification time and inode of the file
//! and of each drop-in, and the drop-in directory's listing) compared every second.
//! A file replaced by rename gets a new inode, which the mounted directory shows. Where
//! the file is mounted alone (its host directory holds more than kubelet configuration,
//! see `tas_api::config::kubelet_mounts`), the mount keeps the old inode, now with no
//! name left on the host: a link count of 0. The agent then exits, and the kubelet
//! restarts it with the new file mounted.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{SourceConfig, document};
use crate::triggers::Trigger;

/// What the files look like now; equal stamps mean nothing visible changed.
pub fn stamp(source: &SourceConfig) -> u64 {
    let mut hasher = DefaultHasher::new();
    stat(&source.file, &mut hasher);
    if let Some(dir) = &source.config_dir {
        match document::drop_ins(dir) {
            Ok(files) => {
                for file in files {
                    file.hash(&mut hasher);
                    stat(&file, &mut hasher);
                }
            }
            Err(e) => e.kind().hash(&mut hasher),
        }
    }
    hasher.finish()
}

fn stat(path: &Path, hasher: &mut DefaultHasher) {
    match std::fs::metadata(path) {
        Ok(m) => (m.len(), m.mtime(), m.mtime_nsec(), m.ino()).hash(hasher),
        Err(e) => e.kind().hash(hasher),
    }
}

/// Exit code of an agent whose singly mounted config file was replaced on the host.
pub const EXIT_CONFIG_REPLACED: i32 = 3;

/// Whether the file behind `m` has no name left on the host: replaced by rename (or
/// deleted) while bind-mounted alone.
pub fn replaced_on_host(m: &std::fs::Metadata) -> bool {
    m.nlink() == 0
}

/// Sends [`Trigger::KubeletConfig`] whenever the stamp changes, checking every `every`;
/// ends the process when the config file was replaced under a single-file mount.
pub async fn watch(source: SourceConfig, every: Duration, tx: mpsc::Sender<Trigger>) {
    let mut last: Option<u64> = None;
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        if std::fs::metadata(&source.file).is_ok_and(|m| replaced_on_host(&m)) {
            tracing::error!(
                file = %source.file.display(),
                "the kubelet config file was replaced on the host; exiting so the kubelet restarts the agent with the new file mounted"
            );
            std::process::exit(EXIT_CONFIG_REPLACED);
        }
        let checked = source.clone();
        let Ok(now) = tokio::task::spawn_blocking(move || stamp(&checked)).await else {
            return;
        };
        if last.is_some_and(|l| l != now) && tx.send(Trigger::KubeletConfig).await.is_err() {
            return;
        }
        last = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_with_no_name_left_counts_as_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "x").unwrap();
        // What a single-file bind mount shows after a rename over the host path: the
        // old inode, unlinked. An open handle shows the same.
        let held = std::fs::File::open(&path).unwrap();
        assert!(!replaced_on_host(&held.metadata().unwrap()));
        std::fs::write(dir.path().join("new"), "y").unwrap();
        std::fs::rename(dir.path().join("new"), &path).unwrap();
        assert!(replaced_on_host(&held.metadata().unwrap()));
        assert!(!replaced_on_host(&std::fs::metadata(&path).unwrap()));
    }

    #[test]
    fn a_rename_over_the_file_or_a_new_drop_in_changes_the_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.yaml");
        let drop_ins = dir.path().join("config.d");
        std::fs::create_dir(&drop_ins).unwrap();
        std::fs::write(&file, "topologyManagerPolicy: restricted\n").unwrap();
        let source = SourceConfig {
            file: file.clone(),
            config_dir: Some(drop_ins.clone()),
            ..SourceConfig::default()
        };
        let first = stamp(&source);
        assert_eq!(stamp(&source), first, "nothing changed");

        // Same size, same second: only the inode tells.
        let next = dir.path().join("config.yaml.new");
        std::fs::write(&next, "topologyManagerPolicy: restricted\n").unwrap();
        std::fs::rename(&next, &file).unwrap();
        let renamed = stamp(&source);
        assert_ne!(renamed, first);

        std::fs::write(drop_ins.join("10-tm.conf"), "").unwrap();
        assert_ne!(stamp(&source), renamed);
    }
}

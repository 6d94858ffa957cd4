//! What the figures were measured on: the machine, the component versions (each
//! binary's own `--version`), the git commit, the date and the command line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use k8s_openapi::jiff::Timestamp;

use crate::procfs;

/// The machine and software a report's figures come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// Logical CPUs.
    pub cpus: usize,
    /// Total memory, bytes.
    pub memory_bytes: Option<u64>,
    /// CPU model name.
    pub cpu_model: Option<String>,
    /// Component → first line of its `--version`.
    pub versions: Vec<(String, String)>,
    /// `git describe`-like commit of the work tree, if it is a git checkout.
    pub git_commit: Option<String>,
    /// When the benchmark ran (UTC).
    pub date: String,
    /// The command line, program name without its directory.
    pub command: String,
}

impl Environment {
    /// Collects everything; `binaries` are (component, path) pairs to ask `--version`.
    pub fn collect(binaries: &[(&str, PathBuf)], args: impl IntoIterator<Item = String>) -> Self {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        Self {
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            memory_bytes: procfs::parse_kb_field(&read("/proc/meminfo"), "MemTotal"),
            cpu_model: procfs::parse_cpu_model(&read("/proc/cpuinfo")),
            versions: binaries
                .iter()
                .map(|(name, path)| {
                    let version = version_of(path).unwrap_or_else(|| "unknown".into());
                    (name.to_string(), version)
                })
                .collect(),
            git_commit: git_commit(),
            date: Timestamp::now().strftime("%Y-%m-%d %H:%M UTC").to_string(),
            command: command_line(args),
        }
    }
}

/// The first non-empty line `binary --version` prints.
fn version_of(binary: &Path) -> Option<String> {
    let out = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// The current commit, with a note when tracked files have changed since.
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit} (with uncommitted changes)")
    } else {
        commit
    })
}

/// `args` as a shell command: the program by its file name only, arguments quoted
/// when they hold anything but plain characters.
pub fn command_line(args: impl IntoIterator<Item = String>) -> String {
    let mut args = args.into_iter();
    let program = args
        .next()
        .map(|p| {
            Path::new(&p)
                .file_name()
                .map_or(p.clone(), |f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "tas-bench".into());
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=,:@%+".contains(c);
    std::iter::once(program)
        .chain(args.map(|a| {
            if !a.is_empty() && a.chars().all(plain) {
                a
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        }))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_drops_the_program_directory_and_quotes() {
        let args = [
            "/some/dir/tas-bench",
            "--runs",
            "3",
            "--out",
            "a b.md",
            "it's",
        ];
        assert_eq!(
            command_line(args.map(String::from)),
            "tas-bench --runs 3 --out 'a b.md' 'it'\\''s'"
        );
    }

    #[test]
    fn versions_come_from_the_binaries() {
        let env = Environment::collect(
            &[("missing", PathBuf::from("/nonexistent/x"))],
            ["tas-bench".to_string()],
        );
        assert_eq!(
            env.versions,
            [("missing".to_string(), "unknown".to_string())]
        );
        assert!(env.cpus >= 1);
        assert!(env.date.ends_with("UTC"));
    }
}

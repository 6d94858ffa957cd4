//! What the runner reads from `/proc`: a process's CPU time and peak resident memory,
//! and the machine's CPU model and memory for the report.
//!
//! The parsers take the file's text, so they are tested on fixed strings; the readers
//! around them only open the files.

use std::time::Duration;

/// CPU time and peak memory of one process at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessSample {
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// `VmHWM`: the peak resident set size so far, in bytes.
    pub peak_rss_bytes: u64,
    /// `RssAnon`: resident anonymous memory now (heap, stacks), in bytes; the rest of
    /// the RSS is file-backed (the binary's code pages, shared with the page cache).
    pub anon_rss_bytes: u64,
    /// `VmRSS`: resident memory now, in bytes.
    pub rss_bytes: u64,
    /// `RssFile`: resident file-backed memory now (the binary's code pages), in bytes.
    pub file_rss_bytes: u64,
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line, in clock ticks.
///
/// The command name (field 2) is in parentheses and may itself hold spaces and
/// parentheses, so fields are counted from the last `)`.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // After the name: field 3 (state) is the first; utime is field 14.
    let mut fields = after_comm.split_whitespace().skip(14 - 3);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The value of a `Name:   <n> kB` line of `/proc/<pid>/status` or `/proc/meminfo`, in
/// bytes.
pub fn parse_kb_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(':')?;
        let mut parts = rest.split_whitespace();
        let value: u64 = parts.next()?.parse().ok()?;
        match parts.next() {
            Some("kB") => Some(value * 1024),
            None => Some(value),
            Some(_) => None,
        }
    })
}

/// The first `model name` of `/proc/cpuinfo`.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_string())
    })
}

/// Samples process `pid` (`None`: the runner itself).
pub fn sample(pid: Option<u32>) -> std::io::Result<ProcessSample> {
    let dir = match pid {
        Some(pid) => format!("/proc/{pid}"),
        None => "/proc/self".to_string(),
    };
    let stat = std::fs::read_to_string(format!("{dir}/stat"))?;
    let status = std::fs::read_to_string(format!("{dir}/status"))?;
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    Ok(ProcessSample {
        cpu_ticks: parse_stat_cpu_ticks(&stat).ok_or_else(|| invalid("no utime/stime in stat"))?,
        peak_rss_bytes: parse_kb_field(&status, "VmHWM").ok_or_else(|| invalid("no VmHWM"))?,
        anon_rss_bytes: parse_kb_field(&status, "RssAnon").unwrap_or(0),
        rss_bytes: parse_kb_field(&status, "VmRSS").unwrap_or(0),
        file_rss_bytes: parse_kb_field(&status, "RssFile").unwrap_or(0),
    })
}

/// Resets the runner's own `VmHWM` to its current RSS (Linux ≥ 4.0), so the peak of
/// each in-runner measurement starts afresh. Best effort: an older kernel keeps the
/// lifetime peak, which the report then overstates.
pub fn reset_own_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Clock ticks per second (`getconf CLK_TCK`; 100, the Linux value, if that fails).
/// Reading it through libc would need `unsafe`, which the workspace forbids.
pub fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .filter(|&ticks| ticks > 0)
        .unwrap_or(100)
}

/// CPU time between two samples.
pub fn cpu_between(before: ProcessSample, after: ProcessSample, ticks_per_second: u64) -> Duration {
    let ticks = after.cpu_ticks.saturating_sub(before.cpu_ticks);
    Duration::from_secs_f64(ticks as f64 / ticks_per_second.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A name with spaces and a parenthesis; utime 1200, stime 345.
        let stat = "4242 (kube sched) x) S 1 4242 4242 0 -1 4194560 9000 0 3 0 1200 345 \
                    0 0 20 0 12 0 100 2000000 3000 18446744073709551615";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(1545));
        assert_eq!(parse_stat_cpu_ticks("4242 (truncated"), None);
        assert_eq!(parse_stat_cpu_ticks("1 (a) S 1 2"), None);
    }

    #[test]
    fn kb_fields_in_bytes() {
        let status =
            "Name:\tkube-scheduler\nVmPeak:\t  900000 kB\nVmHWM:\t  123456 kB\nThreads:\t12\n";
        assert_eq!(parse_kb_field(status, "VmHWM"), Some(123_456 * 1024));
        assert_eq!(parse_kb_field(status, "Threads"), Some(12));
        assert_eq!(parse_kb_field(status, "VmRSS"), None);
        let meminfo = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(parse_kb_field(meminfo, "MemTotal"), Some(24_576_000 * 1024));
    }

    #[test]
    fn cpu_model_is_the_first_model_name() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Example CPU @ 2.00GHz\n\nprocessor\t: 1\nmodel name\t: Other\n";
        assert_eq!(
            parse_cpu_model(cpuinfo).as_deref(),
            Some("Example CPU @ 2.00GHz")
        );
        assert_eq!(parse_cpu_model("processor: 0\n"), None);
    }

    #[test]
    fn own_process_can_be_sampled() {
        let s = sample(None).unwrap();
        assert!(s.peak_rss_bytes > 0);
        assert!(s.anon_rss_bytes > 0 && s.anon_rss_bytes <= s.peak_rss_bytes);
        assert!(s.rss_bytes >= s.anon_rss_bytes + s.file_rss_bytes);
        let later = ProcessSample {
            cpu_ticks: s.cpu_ticks + 250,
            ..s
        };
        assert_eq!(cpu_between(s, later, 100), Duration::from_millis(2500));
    }
}

//! What this machine is like now, for the RPC predicates: battery, free disk and memory, load.
//!
//! [`read`] takes one [`Readings`] snapshot; the `rpc` crate's predicates are evaluated against
//! it (sans-IO, so the readings are made here, in the I/O shell). A reading that cannot be made
//! is `None` (logged at debug level), and a predicate on it fails rather than guesses.
//!
//! Sources (Linux):
//!
//! - battery and charging: the first `/sys/class/power_supply/*` (in name order) whose `type` is
//!   `Battery`: `capacity`, else `energy_now`/`energy_full` or `charge_now`/`charge_full`.
//!   `charging` means *on external power*: a `Mains` or `USB` supply is `online`, or the battery's
//!   `status` is `Charging`, `Full` or `Not charging` (held at a threshold); `Discharging` is
//!   false. With `rpc.battery_command` set, its output instead: a percentage (`87`, `87.5`,
//!   `87%`), optionally followed by `charging`, `discharging`, `full` or `ac`.
//! - moving: `rpc.moving_command`'s output, `1`/`0`, `yes`/`no`, `true`/`false`, `on`/`off`,
//!   `moving`/`still`. No command: `None`.
//! - free disk: `statvfs` of the data directory (of its nearest existing ancestor), blocks
//!   available to unprivileged users × fragment size.
//! - free memory: `MemAvailable` in `/proc/meminfo`; load: the 1-minute figure of
//!   `/proc/loadavg`; uptime: `/proc/uptime`; cpus: `available_parallelism`.
//! - hour, minute, weekday: local time, from `TZ` or `/etc/localtime` (UTC when neither says).
//!
//! The configured commands run with argv (no shell), the daemon's environment, stdin from
//! `/dev/null`, in a process group of their own that is killed after [`COMMAND_TIMEOUT`]; at most
//! 4 KiB of their stdout is read, and a non-zero exit status counts as no reading.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt as _;
use tokio::process::Command;

use crate::config::RpcConfig;

/// Where Linux lists power supplies.
pub const POWER_SUPPLY: &str = "/sys/class/power_supply";

/// Longest a configured fact command may take before it is killed and its reading is `None`.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// Most bytes of a fact command's output that are read.
const COMMAND_OUTPUT: u64 = 4096;

/// One snapshot of this machine's state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Readings {
    /// Battery charge in percent (0 to 100).
    pub battery: Option<f64>,
    /// Whether the machine is on external power (see the module doc).
    pub charging: Option<bool>,
    /// Bytes free for unprivileged use on the data directory's file system.
    pub free_disk: Option<u64>,
    /// Bytes of memory available (`MemAvailable`).
    pub free_memory: Option<u64>,
    /// Load average over the last minute.
    pub load: Option<f64>,
    /// CPUs this process may use.
    pub cpus: Option<u64>,
    /// Whether the machine is moving (from `rpc.moving_command`).
    pub moving: Option<bool>,
    /// Local hour, 0 to 23.
    pub hour: u8,
    /// Local minute, 0 to 59.
    pub minute: u8,
    /// Local day of the week, 1 (Monday) to 7 (Sunday).
    pub weekday: u8,
    /// Seconds since the machine booted.
    pub uptime_s: Option<u64>,
    /// The configured hardware tags (`rpc.tags`).
    pub tags: Vec<String>,
}

/// Reads everything now: the configured commands (concurrently, each bounded by
/// [`COMMAND_TIMEOUT`]) and the system files (on a blocking thread).
pub async fn read(cfg: &RpcConfig, data_dir: &Path) -> Readings {
    let battery = async {
        match &cfg.battery_command {
            Some(argv) => match command_output(argv).await {
                Some(text) => {
                    let reading = parse_battery_output(&text);
                    if reading.0.is_none() {
                        tracing::debug!("rpc.battery_command printed no percentage: {text:?}");
                    }
                    reading
                }
                None => (None, None),
            },
            None => tokio::task::spawn_blocking(|| read_power_supply(Path::new(POWER_SUPPLY)))
                .await
                .unwrap_or_default(),
        }
    };
    let moving = async {
        let text = command_output(cfg.moving_command.as_deref()?).await?;
        let flag = parse_flag(&text);
        if flag.is_none() {
            tracing::debug!("rpc.moving_command printed neither yes nor no: {text:?}");
        }
        flag
    };
    let system = {
        let data_dir = data_dir.to_owned();
        tokio::task::spawn_blocking(move || read_system(&data_dir))
    };
    let ((battery, charging), moving, system) = tokio::join!(battery, moving, system);
    let mut readings = system.unwrap_or_default();
    readings.battery = battery;
    readings.charging = charging;
    readings.moving = moving;
    readings.tags = cfg.tags.clone();
    readings
}

/// Everything that comes from files and system calls.
fn read_system(data_dir: &Path) -> Readings {
    let file = |path: &str| match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) => {
            tracing::debug!("reading {path}: {e}");
            None
        }
    };
    let (hour, minute, weekday) = clock_fields(&jiff::Zoned::now());
    Readings {
        free_disk: free_disk(data_dir),
        free_memory: file("/proc/meminfo").as_deref().and_then(parse_meminfo),
        load: file("/proc/loadavg").as_deref().and_then(parse_loadavg),
        cpus: std::thread::available_parallelism()
            .ok()
            .and_then(|n| u64::try_from(n.get()).ok()),
        uptime_s: file("/proc/uptime").as_deref().and_then(parse_uptime),
        hour,
        minute,
        weekday,
        ..Readings::default()
    }
}

/// Hour, minute and weekday (1 = Monday) of a zoned time.
pub fn clock_fields(now: &jiff::Zoned) -> (u8, u8, u8) {
    let field = |v: i8| u8::try_from(v).unwrap_or(0);
    (
        field(now.hour()),
        field(now.minute()),
        field(now.weekday().to_monday_one_offset()),
    )
}

/// Free bytes for unprivileged use on the file system holding `dir` (or its nearest existing
/// ancestor: the data directory may not exist yet).
fn free_disk(dir: &Path) -> Option<u64> {
    let existing = dir.ancestors().find(|d| d.exists())?;
    match nix::sys::statvfs::statvfs(existing) {
        Ok(s) => {
            let bytes = u128::from(s.blocks_available()) * s.fragment_size() as u128;
            Some(u64::try_from(bytes).unwrap_or(u64::MAX))
        }
        Err(e) => {
            tracing::debug!("statvfs {}: {e}", existing.display());
            None
        }
    }
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
pub fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line["MemAvailable:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    let scale = match words.next() {
        None | Some("B") => 1,
        Some("kB") => 1024,
        Some("MB") => 1024 * 1024,
        Some(_) => return None,
    };
    value.checked_mul(scale)
}

/// The 1-minute load average of `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace()
        .next()?
        .parse::<f64>()
        .ok()
        .filter(|l| l.is_finite() && *l >= 0.0)
}

/// Whole seconds of `/proc/uptime`.
pub fn parse_uptime(text: &str) -> Option<u64> {
    let seconds: f64 = text.split_whitespace().next()?.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then_some(seconds as u64)
}

/// A battery command's output: a percentage (`87`, `87.5`, `87%`, 0 to 100), optionally followed
/// by `charging`, `discharging`, `full` or `ac`.
pub fn parse_battery_output(text: &str) -> (Option<f64>, Option<bool>) {
    let mut words = text.split_whitespace();
    let percent = words
        .next()
        .map(|w| w.strip_suffix('%').unwrap_or(w))
        .and_then(|w| w.parse::<f64>().ok())
        .filter(|p| (0.0..=100.0).contains(p));
    let charging = match words.next().map(str::to_ascii_lowercase).as_deref() {
        Some("charging" | "full" | "ac") => Some(true),
        Some("discharging") => Some(false),
        _ => None,
    };
    (percent, charging)
}

/// A yes/no answer: `1`/`0`, `yes`/`no`, `true`/`false`, `on`/`off`, `moving`/`still`, in any case,
/// surrounding white space ignored.
pub fn parse_flag(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "yes" | "y" | "true" | "on" | "moving" => Some(true),
        "0" | "no" | "n" | "false" | "off" | "still" => Some(false),
        _ => None,
    }
}

/// Battery percentage and external power from a directory laid out as
/// `/sys/class/power_supply` (see the module doc).
pub fn read_power_supply(dir: &Path) -> (Option<f64>, Option<bool>) {
    let mut supplies: Vec<_> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
        Err(e) => {
            tracing::debug!("listing {}: {e}", dir.display());
            return (None, None);
        }
    };
    supplies.sort();
    let attribute = |supply: &Path, name: &str| {
        std::fs::read_to_string(supply.join(name))
            .ok()
            .map(|s| s.trim().to_owned())
    };
    let number = |supply: &Path, name: &str| attribute(supply, name)?.parse::<f64>().ok();
    let mut battery = None;
    let mut status = None;
    let mut external: Option<bool> = None;
    for supply in &supplies {
        match attribute(supply, "type").as_deref() {
            Some("Battery") if battery.is_none() => {
                let ratio = |now: &str, full: &str| {
                    let (now, full) = (number(supply, now)?, number(supply, full)?);
                    (full > 0.0).then(|| now / full * 100.0)
                };
                battery = number(supply, "capacity")
                    .or_else(|| ratio("energy_now", "energy_full"))
                    .or_else(|| ratio("charge_now", "charge_full"))
                    .map(|p| p.clamp(0.0, 100.0));
                if battery.is_some() {
                    status = attribute(supply, "status");
                }
            }
            Some("Battery") | None => {}
            Some(_) => {
                if let Some(online) = attribute(supply, "online") {
                    external = Some(external == Some(true) || online == "1");
                }
            }
        }
    }
    let charging = match (external, status.as_deref()) {
        (Some(true), _) => Some(true),
        (_, Some("Charging" | "Full" | "Not charging")) => Some(true),
        (_, Some("Discharging")) => Some(false),
        (Some(false), _) => Some(false),
        _ => None,
    };
    (battery, charging)
}

/// Runs a fact command (see the module doc): its stdout as text, or `None` (logged).
async fn command_output(argv: &[String]) -> Option<String> {
    let (program, args) = argv.split_first()?;
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            tracing::debug!("running {program}: {e}");
            return None;
        }
    };
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let mut stdout = child.stdout.take()?;
    let finished = tokio::time::timeout(COMMAND_TIMEOUT, async {
        let mut text = Vec::new();
        let read = (&mut stdout)
            .take(COMMAND_OUTPUT)
            .read_to_end(&mut text)
            .await;
        // Output beyond the cap is not waited for: the command is done as far as we care.
        drop(stdout);
        (read, child.wait().await, text)
    })
    .await;
    match finished {
        Ok((Ok(_), Ok(status), text)) if status.success() => {
            Some(String::from_utf8_lossy(&text).into_owned())
        }
        Ok((read, status, _)) => {
            tracing::debug!("{program}: read {read:?}, exit {status:?}");
            None
        }
        Err(_) => {
            if let Some(group) = group {
                let _ = killpg(group, Signal::SIGKILL);
            }
            let _ = child.wait().await;
            tracing::debug!("{program}: no answer within {COMMAND_TIMEOUT:?}, killed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A directory removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Self {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let dir = std::env::temp_dir().join(format!(
                "ferry-facts-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        fn supply(&self, name: &str, attributes: &[(&str, &str)]) {
            let dir = self.0.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            for (k, v) in attributes {
                std::fs::write(dir.join(k), format!("{v}\n")).unwrap();
            }
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn meminfo() {
        let text = "MemTotal:       16314044 kB\nMemFree:          512000 kB\nMemAvailable:    8000000 kB\nBuffers:  1 kB\n";
        assert_eq!(parse_meminfo(text), Some(8_000_000 * 1024));
        assert_eq!(parse_meminfo("MemFree: 5 kB\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: lots kB\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: 5 parsecs\n"), None);
    }

    #[test]
    fn loadavg_and_uptime() {
        assert_eq!(parse_loadavg("0.52 0.58 0.59 1/1203 41235\n"), Some(0.52));
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("high 1 1"), None);
        assert_eq!(parse_uptime("350735.47 234388.90\n"), Some(350_735));
        assert_eq!(parse_uptime("-1 0"), None);
        assert_eq!(parse_uptime(""), None);
    }

    #[test]
    fn battery_command_output() {
        assert_eq!(parse_battery_output("87\n"), (Some(87.0), None));
        assert_eq!(
            parse_battery_output(" 87.5% charging\n"),
            (Some(87.5), Some(true))
        );
        assert_eq!(
            parse_battery_output("40 Discharging"),
            (Some(40.0), Some(false))
        );
        assert_eq!(parse_battery_output("100 full"), (Some(100.0), Some(true)));
        assert_eq!(parse_battery_output("101"), (None, None));
        assert_eq!(parse_battery_output("-3"), (None, None));
        assert_eq!(parse_battery_output("unknown"), (None, None));
        assert_eq!(parse_battery_output(""), (None, None));
    }

    #[test]
    fn flags() {
        for yes in ["1", "yes\n", " TRUE ", "on", "moving", "Y"] {
            assert_eq!(parse_flag(yes), Some(true), "{yes:?}");
        }
        for no in ["0\n", "no", "False", "off", "still", "n"] {
            assert_eq!(parse_flag(no), Some(false), "{no:?}");
        }
        for neither in ["", "2", "maybe", "1 0"] {
            assert_eq!(parse_flag(neither), None, "{neither:?}");
        }
    }

    #[test]
    fn power_supply_directory() {
        let none = Scratch::new("none");
        assert_eq!(read_power_supply(&none.0), (None, None));
        assert_eq!(read_power_supply(&none.0.join("missing")), (None, None));

        // A laptop on battery: the first battery counts, mains offline.
        let laptop = Scratch::new("laptop");
        laptop.supply("AC", &[("type", "Mains"), ("online", "0")]);
        laptop.supply(
            "BAT0",
            &[
                ("type", "Battery"),
                ("capacity", "42"),
                ("status", "Discharging"),
            ],
        );
        laptop.supply(
            "BAT1",
            &[
                ("type", "Battery"),
                ("capacity", "99"),
                ("status", "Charging"),
            ],
        );
        assert_eq!(read_power_supply(&laptop.0), (Some(42.0), Some(false)));

        // Plugged in: mains online wins over a battery held at its threshold.
        laptop.supply("AC", &[("type", "Mains"), ("online", "1")]);
        laptop.supply("BAT0", &[("status", "Not charging")]);
        assert_eq!(read_power_supply(&laptop.0), (Some(42.0), Some(true)));

        // No capacity file: energy ratio; a USB supply reports power.
        let phone = Scratch::new("phone");
        phone.supply(
            "battery",
            &[
                ("type", "Battery"),
                ("energy_now", "30000000"),
                ("energy_full", "40000000"),
                ("status", "Charging"),
            ],
        );
        assert_eq!(read_power_supply(&phone.0), (Some(75.0), Some(true)));

        // A desktop: mains only, no battery.
        let desktop = Scratch::new("desktop");
        desktop.supply("ACAD", &[("type", "Mains"), ("online", "1")]);
        assert_eq!(read_power_supply(&desktop.0), (None, Some(true)));

        // A battery without a readable charge is no battery.
        let broken = Scratch::new("broken");
        broken.supply("BAT0", &[("type", "Battery"), ("capacity", "n/a")]);
        assert_eq!(read_power_supply(&broken.0), (None, None));
    }

    #[test]
    fn clock_fields_from_a_zoned_time() {
        let t: jiff::Zoned = "2026-11-23T07:05:00+01:00[+01:00]".parse().unwrap();
        assert_eq!(clock_fields(&t), (7, 5, 1)); // a Monday
        let sunday: jiff::Zoned = "2026-11-29T23:59:00+00:00[+00:00]".parse().unwrap();
        assert_eq!(clock_fields(&sunday), (23, 59, 7));
    }

    #[tokio::test]
    async fn commands_and_the_system_are_read() {
        let dir = Scratch::new("read");
        let cfg = RpcConfig {
            battery_command: Some(vec!["/bin/echo".into(), "64%".into(), "charging".into()]),
            moving_command: Some(vec!["/bin/echo".into(), "yes".into()]),
            tags: vec!["gps".into()],
            ..RpcConfig::default()
        };
        let r = read(&cfg, &dir.0.join("not/yet")).await;
        assert_eq!(r.battery, Some(64.0));
        assert_eq!(r.charging, Some(true));
        assert_eq!(r.moving, Some(true));
        assert_eq!(r.tags, vec!["gps".to_string()]);
        assert!(r.free_disk.is_some_and(|b| b > 0));
        assert!(r.free_memory.is_some_and(|b| b > 0));
        assert!(r.load.is_some());
        assert!(r.cpus.is_some_and(|n| n >= 1));
        assert!(r.uptime_s.is_some());
        assert!(r.hour < 24 && r.minute < 60 && (1..=7).contains(&r.weekday));
    }

    #[tokio::test]
    async fn failing_and_slow_commands_give_no_reading() {
        let dir = Scratch::new("slow");
        let cfg = RpcConfig {
            battery_command: Some(vec![
                "/bin/sh".into(),
                "-c".into(),
                "echo 50; exit 3".into(),
            ]),
            moving_command: Some(vec![
                "/bin/sh".into(),
                "-c".into(),
                "sleep 30 & sleep 30; echo 1".into(),
            ]),
            ..RpcConfig::default()
        };
        let started = std::time::Instant::now();
        let r = read(&cfg, &dir.0).await;
        assert_eq!(r.battery, None, "a non-zero exit is no reading");
        assert_eq!(r.moving, None, "a command past its timeout is no reading");
        assert!(started.elapsed() < COMMAND_TIMEOUT + Duration::from_secs(3));
        let missing = RpcConfig {
            battery_command: Some(vec!["/nonexistent/battery".into()]),
            ..RpcConfig::default()
        };
        assert_eq!(read(&missing, &dir.0).await.battery, None);
    }
}

//! Two network namespaces `fb<pid><tag>a` and `fb<pid><tag>b` joined by one veth pair
//! (10.99.0.1/24 and 10.99.0.2/24, IPv6 off so that no router solicitation counts as traffic),
//! made with iproute2 and removed with their veth on drop. The link is cut and restored on a's
//! side (`ip link set down|up`: both ends lose carrier, as when a radio goes out of range); a
//! `tc tbf` on a's device limits a → b. It never touches a namespace or device it did not make.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use testbed::net::run;

/// Fails with a message a person can act on unless this is root with iproute2 and tc.
pub(crate) fn check_root() -> Result<()> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        bail!(
            "ferry bench makes network namespaces and limits links with tc: it must run as root \
             (e.g. `sudo ferry bench …`); `ferry bench rpc` alone needs no root"
        );
    }
    for tool in ["ip", "tc"] {
        if Command::new(tool).arg("-V").output().is_err() {
            bail!("`{tool}` was not found: install iproute2");
        }
    }
    Ok(())
}

/// Runs `ip ARGS`, with its stderr in the error.
pub(crate) fn ip(args: &[&str]) -> Result<()> {
    run("ip", args)
}

/// The two namespaces and their veth; removed on drop.
pub(crate) struct Pair {
    made: Vec<String>,
    /// Namespace of the sending node.
    pub(crate) a: String,
    /// Namespace of the receiving node.
    pub(crate) b: String,
    /// a's end of the veth (cut, restored and rate-limited here).
    pub(crate) dev_a: String,
    /// b's end of the veth (its received bytes are counted).
    pub(crate) dev_b: String,
}

/// b's address on the veth, where a dials it.
pub(crate) const ADDR_B: &str = "10.99.0.2";

impl Pair {
    /// Makes the pair; `tag` (one letter per part) keeps parts of one run apart.
    pub(crate) fn create(tag: &str) -> Result<Self> {
        let prefix = format!("fb{}{tag}", std::process::id());
        let mut pair = Pair {
            made: Vec::new(),
            a: format!("{prefix}a"),
            b: format!("{prefix}b"),
            dev_a: format!("{prefix}a0"),
            dev_b: format!("{prefix}b0"),
        };
        for ns in [pair.a.clone(), pair.b.clone()] {
            ip(&["netns", "add", &ns])?;
            // Made: removed on drop even if a later step fails.
            pair.made.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            for key in [
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ] {
                run("ip", &["netns", "exec", &ns, "sysctl", "-qw", key])?;
            }
        }
        ip(&[
            "link",
            "add",
            &pair.dev_a,
            "netns",
            &pair.a,
            "type",
            "veth",
            "peer",
            "name",
            &pair.dev_b,
            "netns",
            &pair.b,
        ])?;
        for (ns, dev, addr) in [
            (&pair.a, &pair.dev_a, "10.99.0.1/24"),
            (&pair.b, &pair.dev_b, "10.99.0.2/24"),
        ] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(pair)
    }

    /// Cuts (`false`) or restores (`true`) the link.
    pub(crate) fn set_link(&self, up: bool) -> Result<()> {
        ip(&[
            "-n",
            &self.a,
            "link",
            "set",
            &self.dev_a,
            if up { "up" } else { "down" },
        ])
    }

    /// Limits a → b to `bits` per second with a token bucket (burst 10 ms of the rate, at
    /// least 64 KB, so the bucket is not the limit at 100 Mbit/s; 100 ms of queue), or lifts
    /// the limit.
    pub(crate) fn limit(&self, bits: Option<u64>) -> Result<()> {
        let base = ["netns", "exec", &self.a, "tc", "qdisc"];
        match bits {
            Some(bits) => {
                let burst = (bits / 8 / 100).max(64 * 1024).to_string();
                let rate = format!("{bits}bit");
                let mut args = base.to_vec();
                args.extend([
                    "replace",
                    "dev",
                    &self.dev_a,
                    "root",
                    "tbf",
                    "rate",
                    &rate,
                    "burst",
                    &burst,
                    "latency",
                    "100ms",
                ]);
                ip(&args)
            }
            None => {
                // No limit set is not an error here.
                let mut args = base.to_vec();
                args.extend(["del", "dev", &self.dev_a, "root"]);
                let _ = ip(&args);
                Ok(())
            }
        }
    }

    /// A command that runs `program` in namespace `ns` (`ip netns exec` execs it, so the
    /// child's pid is the program's).
    pub(crate) fn command(ns: &str, program: &Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns]).arg(program);
        cmd
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end in it, and with it the pair.
        for ns in &self.made {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Bytes received on `dev` as seen by process `pid` (`/proc/PID/net/dev` is the table of the
/// process's namespace, so this reads b's counters from outside it, cheaply enough to poll every
/// few milliseconds).
pub(crate) fn rx_bytes(pid: u32, dev: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/net/dev");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    text.lines()
        .find_map(|l| {
            let (name, rest) = l.split_once(':')?;
            (name.trim() == dev).then(|| rest.split_whitespace().next()?.parse().ok())?
        })
        .with_context(|| format!("no {dev} in {path}"))
}

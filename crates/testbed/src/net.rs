//! The network of a run: a namespace per node, a veth pair per link the run's schedule ever
//! brings up (each end its own /30 and a `tc tbf` shaping what leaves it), made with iproute2
//! and removed when dropped. Links are taken down and up by setting both ends' devices down and
//! up, which the nodes see as the kernel's link changes.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::{Context as _, Result, bail};

/// Runs `program ARGS` (`ip`, `tc`, …), failing with the command line and its stderr.
pub fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Whether this process can make namespaces: root, with iproute2 and tc.
pub fn can_run() -> Result<()> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        bail!("the testbed makes network namespaces: run it as root");
    }
    for tool in ["ip", "tc"] {
        let found = Command::new(tool)
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            bail!("the testbed needs {tool} (iproute2)");
        }
    }
    Ok(())
}

/// One link: its devices and addresses, `a` the lower node.
#[derive(Debug, Clone)]
pub struct Link {
    /// The lower node's device (in its namespace), named after the other node.
    pub dev_a: String,
    /// The higher node's device.
    pub dev_b: String,
    /// The lower node's address.
    pub addr_a: Ipv4Addr,
    /// The higher node's address.
    pub addr_b: Ipv4Addr,
}

/// Namespaces and links of one run; removed on drop.
pub struct Net {
    prefix: String,
    namespaces: Vec<String>,
    links: BTreeMap<(usize, usize), Link>,
}

/// The /30 of link number `k`: 10.99.0.0/16 holds 16,384 of them.
fn subnet(k: usize) -> Result<(Ipv4Addr, Ipv4Addr)> {
    if k >= 16_384 {
        bail!("more than 16,384 links");
    }
    let base = u32::from(Ipv4Addr::new(10, 99, 0, 0)) + 4 * k as u32;
    Ok((Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2)))
}

impl Net {
    /// Makes `nodes` namespaces named `<prefix><i>` and a link for each pair in `links`
    /// (`a < b`), each end shaped to `rate_bps`; those in `up` are up, the others down.
    pub fn build(
        prefix: &str,
        nodes: usize,
        links: &[(usize, usize)],
        up: &dyn Fn(usize, usize) -> bool,
        rate_bps: u64,
    ) -> Result<Net> {
        let mut net = Net {
            prefix: prefix.to_string(),
            namespaces: Vec::new(),
            links: BTreeMap::new(),
        };
        for i in 0..nodes {
            let ns = net.ns(i);
            // A namespace left by a run that was killed is removed first.
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
            run("ip", &["netns", "add", &ns])?;
            // Made: removed on drop even if the next step fails.
            net.namespaces.push(ns.clone());
            run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        }
        let rate = format!("{rate_bps}bit");
        // tbf needs a bucket of at least what the rate brings in a kernel tick (HZ may be 100).
        let burst = format!("{}", (rate_bps / 8 / 100).max(16 * 1024));
        for (k, &(a, b)) in links.iter().enumerate() {
            if a >= b || b >= nodes {
                bail!("link {a}-{b}: nodes are 0..{nodes}, the lower first");
            }
            let (addr_a, addr_b) = subnet(k)?;
            let link = Link {
                dev_a: format!("n{b}"),
                dev_b: format!("n{a}"),
                addr_a,
                addr_b,
            };
            let (ns_a, ns_b) = (net.ns(a), net.ns(b));
            run(
                "ip",
                &[
                    "link",
                    "add",
                    &link.dev_a,
                    "netns",
                    &ns_a,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &link.dev_b,
                    "netns",
                    &ns_b,
                ],
            )?;
            for (ns, dev, addr) in [(&ns_a, &link.dev_a, addr_a), (&ns_b, &link.dev_b, addr_b)] {
                run(
                    "ip",
                    &["-n", ns, "addr", "add", &format!("{addr}/30"), "dev", dev],
                )?;
                run(
                    "tc",
                    &[
                        "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate,
                        "burst", &burst, "latency", "100ms",
                    ],
                )?;
            }
            net.links.insert((a, b), link);
            if up(a, b) {
                net.set(a, b, true)?;
            }
        }
        Ok(net)
    }

    /// Node `i`'s namespace.
    pub fn ns(&self, i: usize) -> String {
        format!("{}{i}", self.prefix)
    }

    /// The link between `a` and `b`, if the run has one.
    pub fn link(&self, a: usize, b: usize) -> Option<&Link> {
        self.links.get(&(a.min(b), a.max(b)))
    }

    /// A handle that takes links down and up from another thread.
    pub fn switch(&self) -> Switch {
        Switch {
            namespaces: self.namespaces.clone(),
            links: self.links.clone(),
        }
    }

    /// Takes the link between `a` and `b` up or down.
    pub fn set(&self, a: usize, b: usize, up: bool) -> Result<()> {
        self.switch().set(a, b, up)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Removing a namespace removes its devices, and so the veth pairs.
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// Takes a run's links down and up (the devices at both ends).
#[derive(Clone)]
pub struct Switch {
    namespaces: Vec<String>,
    links: BTreeMap<(usize, usize), Link>,
}

impl Switch {
    /// Takes the link between `a` and `b` up or down.
    pub fn set(&self, a: usize, b: usize, up: bool) -> Result<()> {
        let (a, b) = (a.min(b), a.max(b));
        let link = self
            .links
            .get(&(a, b))
            .with_context(|| format!("no link {a}-{b} in this network"))?;
        let state = if up { "up" } else { "down" };
        for (node, dev) in [(a, &link.dev_a), (b, &link.dev_b)] {
            let ns = self
                .namespaces
                .get(node)
                .with_context(|| format!("no node {node}"))?;
            run("ip", &["-n", ns, "link", "set", "dev", dev, state])?;
        }
        Ok(())
    }
}

/// Stops every process in the namespaces whose names start with `prefix` (SIGTERM, SIGKILL a
/// second later) and removes the namespaces: the clean-up of a run interrupted before its
/// [`Net`] and nodes were dropped.
pub fn remove_namespaces(prefix: &str) {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect();
    let pids = |ns: &str| -> Vec<String> {
        Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    for signal in ["-TERM", "-KILL"] {
        for ns in &names {
            for pid in pids(ns) {
                let _ = Command::new("kill").args([signal, &pid]).output();
            }
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    for ns in &names {
        let _ = Command::new("ip").args(["netns", "del", ns]).output();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_get_disjoint_subnets() {
        let (a0, b0) = subnet(0).unwrap();
        let (a1, b1) = subnet(1).unwrap();
        assert_eq!(
            (a0, b0),
            (Ipv4Addr::new(10, 99, 0, 1), Ipv4Addr::new(10, 99, 0, 2))
        );
        assert_eq!(
            (a1, b1),
            (Ipv4Addr::new(10, 99, 0, 5), Ipv4Addr::new(10, 99, 0, 6))
        );
        assert_eq!(subnet(16_383).unwrap().1, Ipv4Addr::new(10, 99, 255, 254));
        assert!(subnet(16_384).is_err());
    }
}

//! Network namespaces joined by veth pairs, for the tests that run `ferry node` daemons on
//! networks of their own (`netns.rs`, the namespace soak in `soak.rs`): made with iproute2 as
//! root, removed (with their veth pairs) when dropped. A daemon and its client commands run in a
//! namespace through `ip netns exec` ([`Namespaces::command`]).

use std::process::Command;

/// Runs `ip ARGS`, failing the test with its stderr if it fails.
pub(crate) fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether namespaces can be made here: root, with iproute2.
pub(crate) fn can_run() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let has_ip = Command::new("ip").arg("-V").output().is_ok();
    root && has_ip
}

/// Whether a test that needs namespaces must be skipped here (not root with iproute2): it says
/// so on stderr, and fails instead when `FERRY_REQUIRE_NETNS` is set (CI).
pub(crate) fn skipped() -> bool {
    if can_run() {
        return false;
    }
    assert!(
        std::env::var_os("FERRY_REQUIRE_NETNS").is_none(),
        "FERRY_REQUIRE_NETNS is set but this is not root with iproute2"
    );
    eprintln!("SKIPPED: needs root and iproute2");
    true
}

/// Namespaces `<prefix><name>` (the prefix carries the test's pid, so parallel runs do not
/// collide), each with its loopback up; removed on drop.
pub(crate) struct Namespaces {
    prefix: String,
    names: Vec<String>,
}

impl Namespaces {
    /// Makes a namespace for each of `names`, its full name `<tag><pid mod 100000><name>`.
    pub(crate) fn create(tag: &str, names: &[&str]) -> Self {
        let mut spaces = Namespaces {
            prefix: format!("{tag}{}", std::process::id() % 100_000),
            names: Vec::new(),
        };
        for name in names {
            let ns = spaces.ns(name);
            ip(&["netns", "add", &ns]);
            // Made: removed on drop even if the next step fails.
            spaces.names.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        spaces
    }

    /// The full name of the namespace made for `name`.
    pub(crate) fn ns(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// A veth pair: device `a.1` in namespace `a.0` with address `a.2` (CIDR), and likewise
    /// `b`; both up.
    pub(crate) fn veth(&self, a: (&str, &str, &str), b: (&str, &str, &str)) {
        let (na, nb) = (self.ns(a.0), self.ns(b.0));
        ip(&[
            "link", "add", a.1, "netns", &na, "type", "veth", "peer", "name", b.1, "netns", &nb,
        ]);
        for (ns, dev, addr) in [(&na, a.1, a.2), (&nb, b.1, b.2)] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
    }

    /// What runs a program in the namespace made for `name`: `ip netns exec <ns>`, to be
    /// followed by the program and its arguments (`ip netns exec` execs it: the child's pid is
    /// the program's).
    pub(crate) fn exec(&self, name: &str) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.ns(name)]
    }

    /// `program` to be run in the namespace made for `name` (see [`Namespaces::exec`]).
    pub(crate) fn command(&self, name: &str, program: &str) -> Command {
        let exec = self.exec(name);
        let mut cmd = Command::new(&exec[0]);
        cmd.args(&exec[1..]).arg(program);
        cmd
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

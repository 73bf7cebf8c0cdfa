//! `ferry demo`: four real nodes on 127.0.0.1 play the project's story. A rescuer's phone asks a
//! drone for an aerial picture, asks whoever can first to add two numbers, calls the roll of every
//! node, and then asks the drone for a slow job whose link breaks mid-call: the result still
//! arrives, by dtn, and the drone ran the job once.
//!
//! ```text
//!   phone ── relay ── drone        every link runs through a daemon::relay::Relay, a TCP
//!     │                            relay on loopback the demo can cut (the drone flies out of
//!   relay                          range) and restore (it is back)
//!     │
//!   tower ── relay ── truck        the truck is two hops from the phone
//! ```
//!
//! The nodes are the daemon itself (`daemon::start`), each with its own store and identity in the
//! demo's directory; the servers serve `examples/` (embedded in this binary, so the demo runs
//! from an installed binary anywhere). Nothing listens beyond 127.0.0.1, and every wait is
//! bounded: a scene that does not get its result fails the demo with a message naming it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use clap::Args;
use daemon::Running;
use daemon::calls::{CallInfo, CallSpec, ParamSpec, ReplyInfo, TimelineEntry};
use daemon::config::parse_node_id;
use daemon::control::{Request, RpcCounters};
use daemon::relay::Relay;

use crate::output::{Align, Table, fmt_bytes, write_stdout};

/// The example procedures and the configuration that declares them, as in `examples/`.
const NODE_TOML: &str = include_str!("../../../examples/node.toml");
const SCRIPTS: [(&str, &str); 4] = [
    ("echo.sh", include_str!("../../../examples/echo.sh")),
    ("photo.sh", include_str!("../../../examples/photo.sh")),
    ("slow.sh", include_str!("../../../examples/slow.sh")),
    ("sum.sh", include_str!("../../../examples/sum.sh")),
];

/// How long the nodes may take to find each other.
const LINK_WAIT: Duration = Duration::from_secs(10);
/// How long a scene's call may take beyond what it asks for (a deadline, a slow job).
const CALL_WAIT: Duration = Duration::from_secs(30);
/// After the link is restored, the phone redials within its backoff (at most
/// `daemon::core::MAX_BACKOFF`, 10 s).
const RESTORE_WAIT: Duration = Duration::from_secs(45);
/// The all-mode roll call's deadline: replies are collected until then.
const ROLL_CALL_DEADLINE: &str = "3s";
/// Side of the aerial picture, in pixels.
const PICTURE_SIZE: i64 = 120;
/// The picture's name in a kept demo directory.
const PICTURE_FILE: &str = "aerial-photo.pgm";
/// The nodes, each with its directory of that name in the demo's directory.
const NODES: [&str; 4] = ["phone", "drone", "tower", "truck"];

/// Arguments of `ferry demo`.
#[derive(Args)]
pub(crate) struct DemoArgs {
    /// Keep the nodes' stores, identities and the picture in DIR (new or empty) instead of a
    /// temporary directory that is removed at the end.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Do not remove the temporary directory at the end.
    #[arg(long)]
    keep: bool,
    /// How many seconds the drone works on the call whose link breaks (1 to 60).
    #[arg(long, value_name = "SECONDS", default_value_t = 4,
          value_parser = clap::value_parser!(u64).range(1..=60))]
    slow: u64,
    /// Give every node a local API on 127.0.0.1 (the addresses are printed), and keep the network
    /// up after the scenes until Ctrl-C, to explore with `ferry status --api ADDR` and friends.
    #[arg(long)]
    api: bool,
    /// Show the nodes' log on stderr: -v for connections and sessions, -vv for every decision.
    #[arg(long, short, action = clap::ArgAction::Count)]
    verbose: u8,
}

pub(crate) fn run(args: DemoArgs) -> Result<()> {
    // The nodes log errors only unless asked (a cut link is expected here, not worth a warning).
    crate::node_cmd::init_logging(args.verbose, "error");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(demo(args))
}

/// Sets up the directory, runs the scenes, then stops the nodes and cleans up whatever happened.
async fn demo(args: DemoArgs) -> Result<()> {
    let (dir, temporary) = prepare_dir(args.dir.as_deref())?;
    let removed_at_end = temporary && !args.keep;
    let started = Instant::now();
    let mut net = None;
    let mut outcome = tokio::select! {
        r = scenes(&args, &dir, removed_at_end, &mut net) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    if outcome.is_ok()
        && args.api
        && let Some(net) = &net
    {
        outcome = linger(net).await;
    }
    if let Some(net) = net {
        net.shut_down().await;
    }
    // A failed demo keeps its directory: the nodes' stores show what happened.
    let remove = removed_at_end && outcome.is_ok();
    let wall = started.elapsed();
    let end = if remove {
        let _ = std::fs::remove_dir_all(&dir);
        format!(
            "The demo took {}. Its directory, with the nodes' stores and identities, was removed \
             (--keep or --dir DIR keeps it, and the picture in it).",
            secs(wall)
        )
    } else {
        format!(
            "The demo took {}. {} holds {}.",
            secs(wall),
            dir.display(),
            what_is_kept(&dir)
        )
    };
    let end = format!("{}\n", wrap(&end, 0, 100));
    if outcome.is_ok() {
        write_stdout(&end)?;
    } else {
        eprint!("{end}");
    }
    outcome
}

/// What a kept demo directory holds, as a sentence's object: each node's directory, the
/// procedures, the picture if scene 1 saved it.
fn what_is_kept(dir: &Path) -> String {
    let mut parts = Vec::new();
    let nodes: Vec<String> = NODES
        .iter()
        .filter(|n| dir.join(n).is_dir())
        .map(|n| format!("{n}/"))
        .collect();
    if !nodes.is_empty() {
        parts.push(format!(
            "the nodes' stores and identities ({})",
            nodes.join(", ")
        ));
    }
    if dir.join("procedures").is_dir() {
        parts.push("the procedures they served (procedures/)".to_owned());
    }
    if dir.join(PICTURE_FILE).is_file() {
        parts.push(format!("the aerial picture ({PICTURE_FILE})"));
    }
    match parts.len() {
        0 => "nothing yet".to_owned(),
        1 => parts.remove(0),
        _ => {
            let last = parts.pop().unwrap_or_default();
            format!("{} and {last}", parts.join(", "))
        }
    }
}

/// The four nodes and the relays between them.
struct Net {
    phone: DemoNode,
    drone: DemoNode,
    tower: DemoNode,
    truck: DemoNode,
    phone_drone: Relay,
    // Held so the links stay up; only the phone–drone link is ever cut.
    _phone_tower: Relay,
    _tower_truck: Relay,
}

/// One running node.
struct DemoNode {
    name: &'static str,
    running: Running,
    /// Its Ed25519 public key, hex.
    key: String,
    /// Its hardware tags (what `has(...)` finds).
    tags: Vec<String>,
}

impl Net {
    async fn shut_down(self) {
        for n in [self.phone, self.drone, self.tower, self.truck] {
            n.running.shut_down().await;
        }
    }

    fn servers(&self) -> [&DemoNode; 3] {
        [&self.drone, &self.tower, &self.truck]
    }

    /// The server that signed a reply, by its key (the reply also names it).
    fn name_of(&self, reply: &ReplyInfo) -> String {
        self.servers()
            .iter()
            .find(|n| n.key == reply.server_key)
            .map(|n| n.name.to_owned())
            .unwrap_or_else(|| reply.server.clone())
    }
}

impl DemoNode {
    async fn start(name: &'static str, config: daemon::Config) -> Result<Self> {
        let tags = config.rpc.tags.clone();
        let running = daemon::start(config)
            .await
            .with_context(|| format!("starting the {name}"))?;
        if let Some(addr) = running.api_addr {
            // So that `ferry peers --api ADDR` finds the node's token.
            crate::api_token::publish(addr.port(), &running.api_token).with_context(|| {
                format!("leaving the {name}'s API token for the ferry commands")
            })?;
        }
        let key = running.control.ask(Request::Status).await?.public_key;
        Ok(Self {
            name,
            running,
            key,
            tags,
        })
    }

    fn tcpcl(&self) -> SocketAddr {
        // Each demo node listens on exactly one address (see `node_config`).
        self.running.tcpcl_addrs[0]
    }

    async fn status(&self) -> Result<daemon::control::Status> {
        Ok(self.running.control.ask(Request::Status).await?)
    }

    async fn rpc(&self) -> Result<RpcCounters> {
        Ok(self.status().await?.rpc)
    }

    async fn peers(&self) -> Result<usize> {
        Ok(self.status().await?.peers)
    }

    /// How many executions of `procedure` it started (0 if it does not serve it).
    async fn runs(&self, procedure: &str) -> Result<u64> {
        Ok(self
            .running
            .control
            .ask(Request::Procedures)
            .await?
            .into_iter()
            .find(|p| p.name == procedure)
            .map_or(0, |p| p.executions))
    }
}

/// What a scene reports for the summary.
struct Outcome {
    scene: &'static str,
    mode: &'static str,
    via: String,
    result: String,
    time_ms: u64,
}

async fn scenes(
    args: &DemoArgs,
    dir: &Path,
    removed_at_end: bool,
    slot: &mut Option<Net>,
) -> Result<()> {
    let net = slot.insert(start_network(args, dir, removed_at_end).await?);
    let mut outcomes = Vec::new();
    outcomes.push(
        scene_picture(net, (!removed_at_end).then_some(dir))
            .await
            .context("scene 1 (explicit: the aerial picture)")?,
    );
    outcomes.push(
        scene_any(net)
            .await
            .context("scene 2 (any: the first answer wins)")?,
    );
    outcomes.push(
        scene_all(net)
            .await
            .context("scene 3 (all: the roll call)")?,
    );
    outcomes.push(
        scene_break(net, args.slow)
            .await
            .context("scene 4 (the link breaks mid-call)")?,
    );
    summary(&outcomes)
}

// ── Setting up ──────────────────────────────────────────────────────────────────────────────

/// The demo's directory: `--dir` (created if missing, refused unless empty), else a fresh one
/// under the system's temporary directory. Returns it and whether it is temporary.
fn prepare_dir(dir: Option<&Path>) -> Result<(PathBuf, bool)> {
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("--dir: creating {}", dir.display()))?;
            let empty = std::fs::read_dir(dir)
                .with_context(|| format!("--dir: reading {}", dir.display()))?
                .next()
                .is_none();
            ensure!(
                empty,
                "--dir {} is not empty: give a new or empty directory (the demo starts fresh nodes)",
                dir.display()
            );
            let dir = std::fs::canonicalize(dir)?;
            Ok((dir, false))
        }
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let dir =
                std::env::temp_dir().join(format!("ferry-demo-{}-{nanos:09}", std::process::id()));
            std::fs::create_dir(&dir)
                .with_context(|| format!("creating the demo directory {}", dir.display()))?;
            Ok((dir, true))
        }
    }
}

/// Writes the example procedures (mode 0755) and their configuration into `dir/procedures`.
fn write_procedures(dir: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let procedures = dir.join("procedures");
    std::fs::create_dir_all(&procedures)
        .with_context(|| format!("creating {}", procedures.display()))?;
    for (name, text) in SCRIPTS {
        let path = procedures.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", path.display()))?;
    }
    let toml = procedures.join("node.toml");
    std::fs::write(&toml, NODE_TOML).with_context(|| format!("writing {}", toml.display()))?;
    Ok(procedures)
}

/// What a node serves.
enum Role<'a> {
    /// Nothing: it only calls.
    Caller,
    /// The example procedures, with these hardware tags (`has(camera)` for the picture).
    Server {
        procedures: &'a Path,
        tags: &'a [&'a str],
    },
}

/// A node `dtn://<name>/` on 127.0.0.1 only: TCPCL on a free port, no UDP, no discovery, an API
/// only when asked, a 1 s keepalive so a cut link is noticed within two seconds.
fn node_config(
    name: &str,
    dir: &Path,
    role: Role,
    peers: Vec<SocketAddr>,
    api: bool,
) -> Result<daemon::Config> {
    let loopback = |port| SocketAddr::from(([127, 0, 0, 1], port));
    let mut c = match role {
        Role::Caller => daemon::Config::defaults("demo"),
        Role::Server { procedures, tags } => {
            let mut c = daemon::Config::from_toml_in(NODE_TOML, "demo", Some(procedures))
                .context("the embedded examples/node.toml")?;
            c.rpc.tags = tags.iter().map(|t| (*t).to_owned()).collect();
            c
        }
    };
    c.node_id = parse_node_id(&format!("dtn://{name}/"))?;
    c.data_dir = Some(dir.join(name));
    c.store_quota = 1_000_000_000;
    c.tcpcl_listen = vec![loopback(0)];
    c.udp_listen = None;
    c.discovery.enabled = false;
    c.api_listen = api.then(|| loopback(0));
    c.keepalive = Duration::from_secs(1);
    c.peers = peers;
    Ok(c)
}

async fn start_network(args: &DemoArgs, dir: &Path, removed_at_end: bool) -> Result<Net> {
    let procedures = write_procedures(dir)?;
    let server = |tags| Role::Server {
        procedures: &procedures,
        tags,
    };
    let camera: &[&str] = &["camera"];
    let api = args.api;
    // Listeners first, then the relays to them, then the nodes that dial through the relays.
    let drone = DemoNode::start(
        "drone",
        node_config("drone", dir, server(camera), vec![], api)?,
    )
    .await?;
    let truck = DemoNode::start(
        "truck",
        node_config("truck", dir, server(camera), vec![], api)?,
    )
    .await?;
    let tower_truck = Relay::start(truck.tcpcl()).await?;
    let tower = DemoNode::start(
        "tower",
        node_config("tower", dir, server(&[]), vec![tower_truck.addr()], api)?,
    )
    .await?;
    let phone_drone = Relay::start(drone.tcpcl()).await?;
    let phone_tower = Relay::start(tower.tcpcl()).await?;
    let phone = DemoNode::start(
        "phone",
        node_config(
            "phone",
            dir,
            Role::Caller,
            vec![phone_drone.addr(), phone_tower.addr()],
            api,
        )?,
    )
    .await?;
    let net = Net {
        phone,
        drone,
        tower,
        truck,
        phone_drone,
        _phone_tower: phone_tower,
        _tower_truck: tower_truck,
    };
    introduce(&net, dir, removed_at_end).await?;
    let began = Instant::now();
    for (node, n) in [
        (&net.phone, 2),
        (&net.drone, 1),
        (&net.tower, 2),
        (&net.truck, 1),
    ] {
        wait_for_peers(node, n, LINK_WAIT)
            .await
            .context("setting up the network")?;
    }
    let route = wait_for_route(&net.phone, "dtn://truck/", Duration::from_secs(5)).await?;
    // And the way back: the phone advertises its second link up to a second after its first
    // (the mesh's least interval between advertisements), and until the truck hears it the
    // truck's replies would take dtn rather than a datagram.
    wait_for_route(&net.truck, "dtn://phone/", Duration::from_secs(5)).await?;
    let mut out = format!(
        "All links up after {}: the phone has 2 neighbours, the tower 2, the drone and the truck 1.\n",
        secs(began.elapsed())
    );
    match route {
        Some(r) => out.push_str(&format!(
            "The phone's mesh route to the truck: through {} ({} hops).\n",
            short(&r.next_hop),
            r.hops
        )),
        None => out.push_str("The phone has no mesh route to the truck yet.\n"),
    }
    out.push('\n');
    write_stdout(&out)?;
    Ok(net)
}

/// Prints who is who, the links, and where the data lives.
async fn introduce(net: &Net, dir: &Path, removed_at_end: bool) -> Result<()> {
    let mut out = String::from(
        "Ferry demo: a rescuer's phone, a drone, a radio tower and a fire truck, four real Ferry\n\
         nodes on 127.0.0.1. Each link runs through a relay the demo can cut, as a radio link breaks.\n\n\
         \x20   phone ────────── drone        the phone calls; the others serve the example\n\
         \x20     │                           procedures (examples/): echo, photo, slow, sum\n\
         \x20     │\n\
         \x20   tower ────────── truck        the truck is two hops from the phone\n\n",
    );
    let api = net.phone.running.api_addr.is_some();
    let mut header = vec![
        ("node", Align::Left),
        ("key", Align::Left),
        ("serves", Align::Left),
        ("tags", Align::Left),
    ];
    if api {
        header.push(("api", Align::Left));
    }
    let mut table = Table::new(&header);
    for node in [&net.phone, &net.drone, &net.tower, &net.truck] {
        let procedures = node
            .running
            .control
            .ask(Request::Procedures)
            .await?
            .into_iter()
            .map(|p| match p.require {
                Some(r) => format!("{} ({r})", p.name),
                None => p.name,
            })
            .collect::<Vec<_>>();
        let (serves, tags) = if procedures.is_empty() {
            ("nothing (it calls)".to_owned(), String::new())
        } else if node.tags.is_empty() {
            (procedures.join(", "), "none".to_owned())
        } else {
            (procedures.join(", "), node.tags.join(", "))
        };
        let mut row = vec![
            format!("dtn://{}/", node.name),
            format!("{}…", &node.key[..node.key.len().min(12)]),
            serves,
            tags,
        ];
        if let Some(a) = node.running.api_addr {
            row.push(a.to_string());
        }
        table.row(row);
    }
    for line in table.render().lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&format!(
        "\nThe nodes' stores and identities are in {}{}.\n\n",
        dir.display(),
        if removed_at_end {
            " (removed at the end)"
        } else {
            ""
        }
    ));
    write_stdout(&out)?;
    Ok(())
}

async fn wait_for_peers(node: &DemoNode, n: usize, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let now = node.peers().await?;
        if now == n {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "the {} has {now} neighbours, not {n}, after {}",
                node.name,
                secs(within)
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_for_route(
    node: &DemoNode,
    destination: &str,
    within: Duration,
) -> Result<Option<daemon::control::RouteInfo>> {
    let deadline = Instant::now() + within;
    loop {
        let routes = node.running.control.ask(Request::Routes).await?;
        if let Some(r) = routes.into_iter().find(|r| r.destination == destination) {
            return Ok(Some(r));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ── The scenes ──────────────────────────────────────────────────────────────────────────────

fn spec(target: &str, procedure: &str, params: Vec<ParamSpec>) -> CallSpec {
    CallSpec {
        target: target.into(),
        procedure: procedure.into(),
        params,
        ..CallSpec::default()
    }
}

/// Waits up to `within` for the call to finish; an error if it did not.
async fn finish(phone: &DemoNode, call: &CallInfo, within: Duration) -> Result<CallInfo> {
    let done = phone
        .running
        .control
        .wait_call(&call.id, daemon::calls::WaitFor::default(), within)
        .await?;
    ensure!(
        done.finished(),
        "the call {} was still {} after {}\n{}",
        call.id,
        done.state,
        secs(within),
        timeline(&done.timeline)
    );
    Ok(done)
}

/// A finished call that must have succeeded, with at least one successful reply.
fn succeeded(done: &CallInfo) -> Result<()> {
    if done.state == "succeeded" && done.replies.iter().any(|r| r.ok) {
        return Ok(());
    }
    let why = done
        .replies
        .iter()
        .filter(|r| !r.ok)
        .map(|r| {
            format!(
                "{} refused it: {}: {}",
                short(&r.server),
                r.code.as_deref().unwrap_or("?"),
                r.detail.as_deref().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    bail!(
        "the call {}{}{}\n{}",
        done.state,
        if why.is_empty() { "" } else { ": " },
        why,
        timeline(&done.timeline)
    )
}

fn heading(n: u32, title: &str, story: &str) -> String {
    let rule = "─".repeat(80usize.saturating_sub(title.len() + 14));
    format!("── Scene {n}: {title} {rule}\n{story}\n")
}

/// Scene 1; the picture is saved in `keep_in` if given (not when the directory goes at the end).
async fn scene_picture(net: &Net, keep_in: Option<&Path>) -> Result<Outcome> {
    write_stdout(&heading(
        1,
        "explicit",
        &format!(
            "The phone asks the drone, by name, for a {PICTURE_SIZE}×{PICTURE_SIZE} aerial picture \
             (photo {PICTURE_SIZE}).\nThe drone is a neighbour, so the call goes by stream; the \
             picture comes back as a file."
        ),
    ))?;
    let made = net
        .phone
        .running
        .control
        .call(spec("drone", "photo", vec![ParamSpec::Int(PICTURE_SIZE)]))
        .await?;
    let done = finish(&net.phone, &made, CALL_WAIT).await?;
    succeeded(&done)?;
    let reply = first_ok(&done);
    let mut out = timeline(&done.timeline);
    out.push_str(&reply_line(net, &done, reply));
    let Some(file) = reply.files.first() else {
        bail!("the result has no file: {reply:?}");
    };
    let content = net
        .phone
        .running
        .control
        .ask(|reply| Request::File {
            hash: file.hash.clone(),
            reply,
        })
        .await?
        .with_context(|| format!("fetching {} from the phone", file.name))?;
    ensure!(
        content.len() as u64 == file.size,
        "{} has {} bytes, the result says {}",
        file.name,
        content.len(),
        file.size
    );
    // The phone files data-channel content under the BLAKE3 hash it computes on arrival, so
    // finding the picture under the result's hash is the hash check; the drone's own copy, under
    // the same hash, must be the same bytes.
    let original = net
        .drone
        .running
        .control
        .ask(|reply| Request::File {
            hash: file.hash.clone(),
            reply,
        })
        .await?
        .with_context(|| format!("fetching {} from the drone", file.name))?;
    ensure!(
        content == original,
        "the phone's {} differs from the drone's",
        file.name
    );
    let header = format!("P2\n{PICTURE_SIZE} {PICTURE_SIZE}\n255\n");
    ensure!(
        content.starts_with(header.as_bytes()),
        "{} is not a {PICTURE_SIZE}×{PICTURE_SIZE} PGM picture",
        file.name
    );
    match keep_in {
        Some(dir) => {
            let path = dir.join(PICTURE_FILE);
            std::fs::write(&path, &content)
                .with_context(|| format!("writing {}", path.display()))?;
            out.push_str(&format!(
                "  picture: saved as {} ({})\n",
                path.display(),
                fmt_bytes(file.size)
            ));
        }
        None => out.push_str(&format!(
            "  picture: {}, not saved (--keep or --dir DIR saves it in the demo's directory)\n",
            fmt_bytes(file.size)
        )),
    }
    out.push_str(&format!(
        "           BLAKE3 {}… as the result names it, byte for byte the drone's copy\n\n",
        &file.hash[..16]
    ));
    write_stdout(&out)?;
    Ok(Outcome {
        scene: "1 picture",
        mode: "explicit",
        via: reply.via.clone(),
        result: reply_value(reply),
        time_ms: reply.at_ms.saturating_sub(done.created_ms),
    })
}

async fn scene_any(net: &Net) -> Result<Outcome> {
    write_stdout(&heading(
        2,
        "any",
        "The phone asks any node that serves `sum` to add 19 and 23 (any sum 19 23). The call is\n\
         broadcast; the first server to start tells the others, who stand down. First result wins.",
    ))?;
    let before = runs(net, "sum").await?;
    let made = net
        .phone
        .running
        .control
        .call(spec(
            "any",
            "sum",
            vec![ParamSpec::Int(19), ParamSpec::Int(23)],
        ))
        .await?;
    let done = finish(&net.phone, &made, CALL_WAIT).await?;
    succeeded(&done)?;
    let reply = first_ok(&done);
    ensure!(
        reply.value_text.as_deref().map(str::trim) == Some("42"),
        "19 + 23 came back as {:?}",
        reply.value_text
    );
    // Executions are counted when they start; give a late starter a moment to show up.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = runs(net, "sum").await?;
    let ran: Vec<String> = net
        .servers()
        .iter()
        .zip(before.iter().zip(&after))
        .filter(|(_, (b, a))| a > b)
        .map(|(n, (b, a))| {
            if a - b == 1 {
                n.name.to_owned()
            } else {
                format!("{} ({}×)", n.name, a - b)
            }
        })
        .collect();
    let mut out = timeline(&done.timeline);
    out.push_str(&reply_line(net, &done, reply));
    out.push_str(&format!(
        "  answered by the {}; ran it: {}\n\n",
        net.name_of(reply),
        if ran.is_empty() {
            "none of the servers (?)".to_owned()
        } else {
            ran.join(", ")
        }
    ));
    write_stdout(&out)?;
    Ok(Outcome {
        scene: "2 first answer",
        mode: "any",
        via: reply.via.clone(),
        result: format!("{} (from the {})", reply_value(reply), net.name_of(reply)),
        time_ms: reply.at_ms.saturating_sub(done.created_ms),
    })
}

async fn scene_all(net: &Net) -> Result<Outcome> {
    write_stdout(&heading(
        3,
        "all",
        &format!(
            "The phone calls the roll: every node that serves `echo` is asked to say \"who is \
             there?\" back\n(all echo), and replies are collected until the call's deadline, {ROLL_CALL_DEADLINE} \
             from now."
        ),
    ))?;
    let question = "who is there?";
    let mut call = spec("all", "echo", vec![ParamSpec::Text(question.into())]);
    call.deadline = Some(ROLL_CALL_DEADLINE.into());
    let made = net.phone.running.control.call(call).await?;
    let done = finish(&net.phone, &made, CALL_WAIT).await?;
    succeeded(&done)?;
    let mut out = timeline(&done.timeline);
    let mut answered = Vec::new();
    for r in done.replies.iter().filter(|r| r.ok) {
        ensure!(
            r.value_text.as_deref() == Some(question),
            "the {} echoed {:?}",
            net.name_of(r),
            r.value_text
        );
        answered.push(net.name_of(r));
        out.push_str(&reply_line(net, &done, r));
    }
    answered.sort();
    answered.dedup();
    let silent: Vec<&str> = net
        .servers()
        .iter()
        .map(|n| n.name)
        .filter(|n| !answered.iter().any(|a| a == n))
        .collect();
    out.push_str(&format!(
        "  {} of 3 servers answered{}\n\n",
        answered.len(),
        if silent.is_empty() {
            ", the truck through the tower".to_owned()
        } else {
            format!("; no answer from the {}", silent.join(", the "))
        }
    ));
    write_stdout(&out)?;
    let mut vias: Vec<&str> = done.replies.iter().map(|r| r.via.as_str()).collect();
    vias.sort();
    vias.dedup();
    let last = done.replies.iter().map(|r| r.at_ms).max().unwrap_or(0);
    // The call lasts until its deadline, whenever the last reply came: its end is the last
    // entry of its timeline.
    let ended_ms = done.timeline.last().map_or(0, |e| e.offset_ms);
    Ok(Outcome {
        scene: "3 roll call",
        mode: "all",
        via: vias.join(", "),
        result: format!(
            "{} answered (the last after {})",
            answered.join(", "),
            secs(Duration::from_millis(last.saturating_sub(done.created_ms)))
        ),
        time_ms: ended_ms,
    })
}

async fn scene_break(net: &Net, slow: u64) -> Result<Outcome> {
    write_stdout(&heading(
        4,
        "the link breaks",
        &format!(
            "The phone asks the drone for a job that takes {slow} s (slow {slow}). Once the drone has \
             acknowledged it,\nthe drone flies out of range: the demo cuts the phone–drone link. \
             It comes back in range only\nafter the result is ready, so the result has to travel \
             store-and-forward (dtn)."
        ),
    ))?;
    let control = &net.phone.running.control;
    let before = net.drone.runs("slow").await?;
    let began = Instant::now();
    let at = |what: &str| format!("  {:>8}  {what}\n", offset(began.elapsed()));
    let made = control
        .call(spec("drone", "slow", vec![ParamSpec::Int(slow as i64)]))
        .await?;
    // The ack: the drone runs the job.
    let deadline = Instant::now() + LINK_WAIT;
    loop {
        let call = control.get_call(&made.id).await?;
        if !call.acks.is_empty() {
            break;
        }
        ensure!(
            !call.finished(),
            "the call ended before an ack: {}\n{}",
            call.state,
            timeline(&call.timeline)
        );
        ensure!(
            Instant::now() < deadline,
            "no ack from the drone within {}",
            secs(LINK_WAIT)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    write_stdout(&at("the drone acknowledged the call and is running it"))?;
    net.phone_drone.cut();
    write_stdout(&at(
        "✂ the drone flies out of range: the phone–drone link is cut",
    ))?;
    wait_for_peers(&net.phone, 1, LINK_WAIT).await?;
    write_stdout(&at(
        "the phone noticed: its only neighbour is the tower now; the call is still waiting",
    ))?;
    // The job ends while the link is down; the drone holds the result for the phone.
    let deadline = Instant::now() + Duration::from_secs(slow) + CALL_WAIT;
    loop {
        if net.drone.runs("slow").await? > before && net.drone.rpc().await?.running == 0 {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the drone did not finish the job within {}",
            secs(Duration::from_secs(slow) + CALL_WAIT)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A moment for the drone to find the path gone and put the result in its store.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = net
        .drone
        .running
        .control
        .ask(Request::Bundles)
        .await?
        .into_iter()
        .filter(|b| b.destination.starts_with("dtn://phone/"))
        .count();
    let waiting = control.get_call(&made.id).await?;
    ensure!(
        waiting.state == "waiting",
        "the call ended while the link was down: {}\n{}",
        waiting.state,
        timeline(&waiting.timeline)
    );
    write_stdout(&at(&format!(
        "the drone has the result but no path to the phone: {held} bundle{} for the phone in its store",
        if held == 1 { "" } else { "s" }
    )))?;
    net.phone_drone.restore();
    write_stdout(&at(&format!(
        "the drone is back in range: link restored\n{}",
        wrap(
            &format!(
                "(the phone redials a lost neighbour {}: it finds the link at its next try)",
                redial_steps()
            ),
            12,
            100
        )
    )))?;
    // The moment the phone's redial succeeds (within its longest step), then the result, which
    // the drone sends as soon as the session is up.
    let deadline = Instant::now() + RESTORE_WAIT;
    loop {
        if net.phone.peers().await? == 2 || control.get_call(&made.id).await?.finished() {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the phone did not redial the drone within {}",
            secs(RESTORE_WAIT)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    write_stdout(&at("the phone redialled the drone: the link is up again"))?;
    let done = finish(&net.phone, &made, RESTORE_WAIT).await?;
    write_stdout(&at("the result arrived"))?;
    succeeded(&done)?;
    let reply = first_ok(&done);
    let expected = format!("slept {slow} s");
    ensure!(
        reply
            .value_text
            .as_deref()
            .is_some_and(|t| t.starts_with(&expected)),
        "the drone answered {:?}",
        reply.value_text
    );
    ensure!(
        reply.via == "dtn",
        "the result came by {}, not dtn\n{}",
        reply.via,
        timeline(&done.timeline)
    );
    // Runs are counted when they start; a second run would have started by now.
    let after = net.drone.runs("slow").await?;
    let runs = after - before;
    let results = done.replies.len();
    let mut out = String::from("  the phone's record of the call:\n");
    out.push_str(&timeline(&done.timeline));
    out.push_str(&reply_line(net, &done, reply));
    out.push_str(&format!(
        "  the drone executed `slow` {} (its runs of `slow`: {before} → {after}); the phone got \
         {results} result{}\n\n",
        match runs {
            1 => "once".to_owned(),
            n => format!("{n} times"),
        },
        if results == 1 { "" } else { "s" }
    ));
    write_stdout(&out)?;
    ensure!(
        runs == 1 && results == 1,
        "the job ran {runs} times and {results} results arrived; once each was expected"
    );
    Ok(Outcome {
        scene: "4 broken link",
        mode: "explicit",
        via: format!("{} (link cut)", reply.via),
        result: reply_value(reply),
        time_ms: reply.at_ms.saturating_sub(done.created_ms),
    })
}

/// Executions of `procedure` started so far on the drone, the tower and the truck.
async fn runs(net: &Net, procedure: &str) -> Result<[u64; 3]> {
    let [a, b, c] = net.servers();
    Ok([
        a.runs(procedure).await?,
        b.runs(procedure).await?,
        c.runs(procedure).await?,
    ])
}

fn summary(outcomes: &[Outcome]) -> Result<()> {
    let mut table = Table::new(&[
        ("scene", Align::Left),
        ("mode", Align::Left),
        ("result came by", Align::Left),
        ("result", Align::Left),
        ("after", Align::Right),
    ]);
    for o in outcomes {
        table.row(vec![
            o.scene.to_owned(),
            o.mode.to_owned(),
            o.via.clone(),
            o.result.clone(),
            secs(Duration::from_millis(o.time_ms)),
        ]);
    }
    let mut out = String::from(
        "── Summary ─────────────────────────────────────────────────────────────────\n",
    );
    for line in table.render().lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    write_stdout(&out)?;
    Ok(())
}

/// With `--api`: the network stays up until Ctrl-C.
async fn linger(net: &Net) -> Result<()> {
    let api = net
        .phone
        .running
        .api_addr
        .map(|a| a.to_string())
        .unwrap_or_default();
    write_stdout(&format!(
        "The network stays up: try `ferry peers --api {api}` (the phone) or `ferry status --api …`\n\
         with the addresses above, or watch the phone in a browser: `ferry dashboard --api {api}`\n\
         prints its web dashboard's address. Ctrl-C stops the nodes.\n"
    ))?;
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}

// ── Formatting ──────────────────────────────────────────────────────────────────────────────

/// A call's timeline, one `+0.012s  what` line per entry.
fn timeline(entries: &[TimelineEntry]) -> String {
    entries
        .iter()
        .map(|e| {
            format!(
                "  {:>8}  {}\n",
                offset(Duration::from_millis(e.offset_ms)),
                e.text
            )
        })
        .collect()
}

/// `+0.012s`.
fn offset(d: Duration) -> String {
    format!("+{:.3}s", d.as_secs_f64())
}

/// `0.42 s`.
fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// `13 ms`, `4.01 s`.
fn millis(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        secs(Duration::from_millis(ms))
    }
}

/// How a node spaces its redials of a static peer it lost, from the daemon's constants: `1 s
/// after losing it, then 2, 4 and 8 s after each failed try, then every 10 s`.
fn redial_steps() -> String {
    let (first, max) = (daemon::core::FIRST_BACKOFF, daemon::core::MAX_BACKOFF);
    let mut then = Vec::new();
    let mut step = first * 2;
    while step < max {
        then.push(step.as_secs_f64().to_string());
        step *= 2;
    }
    let then = match then.split_last() {
        None => String::new(),
        Some((last, [])) => format!("{last} s after a failed try, "),
        Some((last, rest)) => format!("{} and {last} s after each failed try, ", rest.join(", ")),
    };
    format!(
        "{} s after losing it, then {then}then every {} s",
        first.as_secs_f64(),
        max.as_secs_f64()
    )
}

/// `text` in lines of at most `width` characters where it can be, each indented by `indent`
/// spaces (the last without its newline, for [`scene_break`]'s `at`).
fn wrap(text: &str, indent: usize, width: usize) -> String {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("one line at least");
        if !line.is_empty() && indent + line.chars().count() + 1 + word.chars().count() > width {
            lines.push(word.to_owned());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
        .iter()
        .map(|l| format!("{:indent$}{l}", ""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `dtn://drone/` → `drone`.
fn short(node_id: &str) -> &str {
    node_id
        .strip_prefix("dtn://")
        .map(|s| s.trim_end_matches('/'))
        .unwrap_or(node_id)
}

/// The first successful reply (`succeeded` checked there is one).
fn first_ok(done: &CallInfo) -> &ReplyInfo {
    done.replies
        .iter()
        .find(|r| r.ok)
        .expect("a succeeded call has a successful reply")
}

/// The value as one line of text.
fn reply_value(r: &ReplyInfo) -> String {
    match &r.value_text {
        Some(t) => t.trim().replace('\n', " "),
        None => format!(
            "({} bytes of binary)",
            r.value_base64.as_deref().map_or(0, |b| b.len() * 3 / 4)
        ),
    }
}

/// `  result: "42" from the tower via datagram, 0.14 s after the call (ran 2 ms)`.
fn reply_line(net: &Net, call: &CallInfo, r: &ReplyInfo) -> String {
    format!(
        "  result: {:?} from the {} via {}, {} after the call (ran {})\n",
        reply_value(r),
        net.name_of(r),
        r.via,
        secs(Duration::from_millis(
            r.at_ms.saturating_sub(call.created_ms)
        )),
        millis(r.run_ms.unwrap_or(0))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_read_as_seconds_with_milliseconds() {
        assert_eq!(offset(Duration::from_millis(12)), "+0.012s");
        assert_eq!(offset(Duration::from_millis(4_250)), "+4.250s");
        assert_eq!(short("dtn://truck/"), "truck");
    }

    #[test]
    fn wrapped_lines_fit_and_keep_every_word() {
        let text = "(the phone redials a lost neighbour 1 s after losing it, then 2, 4 and 8 s)";
        let wrapped = wrap(text, 12, 40);
        assert!(
            wrapped
                .lines()
                .all(|l| l.len() <= 40 && l.starts_with(&" ".repeat(12)))
        );
        assert_eq!(
            wrapped.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_redial_steps_are_the_daemons() {
        assert_eq!(
            redial_steps(),
            "1 s after losing it, then 2, 4 and 8 s after each failed try, then every 10 s"
        );
    }

    #[test]
    fn the_embedded_configuration_loads_against_the_written_scripts() {
        let dir = std::env::temp_dir().join(format!("ferry-demo-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let procedures = write_procedures(&dir).unwrap();
        let c = node_config(
            "drone",
            &dir,
            Role::Server {
                procedures: &procedures,
                tags: &["camera"],
            },
            vec![],
            false,
        )
        .unwrap();
        let names: Vec<&str> = c.rpc.procedures.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["echo", "photo", "slow", "sum"]);
        assert!(c.tcpcl_listen.iter().all(|a| a.ip().is_loopback()));
        assert!(c.udp_listen.is_none() && c.api_listen.is_none() && !c.discovery.enabled);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

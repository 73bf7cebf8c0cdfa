//! The engine driven by hand, one node at a time: what it does with messages that are forged,
//! tampered with, replayed or misdirected, and which files go when its file budget is full.

use bytes::Bytes;
use node::{Class, Delivery, Event, Node, NodeConfig};
use rpc::{ParamType, ProcedureSpec, Rpc, RpcConfig, RpcEvent};
use seal::Identity;
use std::time::Duration;
use store::MemoryStore;
use wire::rpc::{Call, CallId, CallResult, Message, Mode, Transport, Value};
use wire::{BundleId, CreationTimestamp, DtnTime, Eid};

const NOW: DtnTime = DtnTime::from_millis(820_454_400_000);

fn eid(s: &str) -> Eid {
    s.parse().unwrap()
}

fn server() -> (Node, Rpc) {
    server_with(|_| {})
}

/// The server of `server()`, its configuration changed by `change` first.
fn server_with(change: impl FnOnce(&mut RpcConfig)) -> (Node, Rpc) {
    let mut node = Node::new(
        NodeConfig::new(eid("dtn://server/")),
        Box::new(MemoryStore::new(1 << 20)),
        NOW,
    );
    let mut config = RpcConfig::default();
    config
        .procedures
        .push(ProcedureSpec::new("echo", vec![ParamType::Text]));
    change(&mut config);
    let rpc = Rpc::new(
        config,
        Identity::from_secret([2; 32]),
        [9; 32],
        &mut node,
        NOW,
    );
    (node, rpc)
}

fn call(id: u8) -> Message {
    Message::Call(Call {
        id: CallId([id; 16]),
        caller: eid("dtn://client/"),
        mode: Mode::Explicit,
        server: Some(eid("dtn://server/")),
        procedure: "echo".into(),
        params: vec![Value::Text("hello".into())],
        requirements: String::new(),
        deadline: NOW + Duration::from_millis(60_000),
        transport: Transport::Dtn,
    })
}

fn deliver(node: &mut Node, rpc: &mut Rpc, payload: Vec<u8>, seq: u64) {
    deliver_by(node, rpc, payload, seq, Class::Dtn);
}

/// [`deliver`] in a bundle of `class` (a real-time one comes as by datagram).
fn deliver_by(node: &mut Node, rpc: &mut Rpc, payload: Vec<u8>, seq: u64, class: Class) {
    let event = Event::Delivered(Delivery {
        id: BundleId {
            source: eid("dtn://client/~rpc"),
            creation: CreationTimestamp {
                time: NOW,
                sequence: seq,
            },
            fragment: None,
        },
        destination: eid("dtn://server/~rpc"),
        class,
        created: NOW,
        expiry: NOW + Duration::from_millis(60_000),
        payload: Bytes::from(payload),
    });
    assert!(
        rpc.handle_node_event(NOW, node, &event),
        "the engine's endpoint"
    );
}

fn executions(rpc: &mut Rpc) -> usize {
    std::iter::from_fn(|| rpc.poll_event())
        .filter(|e| matches!(e, RpcEvent::Execute(_)))
        .count()
}

#[test]
fn tampered_and_forged_calls_are_dropped_and_counted() {
    let (mut node, mut rpc) = server();
    let client = Identity::from_secret([1; 32]);
    let body = call(1).encode().unwrap();
    let to = rpc.public_key();
    let sealed = client.seal(&body, Some(&to), [7; 32]).unwrap();

    // A relay flips one bit of the ciphertext, then of the signature, then of the sender key.
    for (n, at) in [sealed.len() / 2, sealed.len() - 1, 3]
        .into_iter()
        .enumerate()
    {
        let mut bad = sealed.clone();
        bad[at] ^= 0x10;
        deliver(&mut node, &mut rpc, bad, n as u64);
    }
    // (A ciphertext re-signed by another key is the seal crate's test: it does not decrypt.)
    // Garbage.
    deliver(&mut node, &mut rpc, b"not an envelope".to_vec(), 11);
    assert_eq!(rpc.stats().forged, 4);
    assert_eq!(executions(&mut rpc), 0, "nothing forged may run");

    // The genuine call runs, once, however often it arrives.
    deliver(&mut node, &mut rpc, sealed.clone(), 20);
    deliver(&mut node, &mut rpc, sealed.clone(), 21);
    assert_eq!(executions(&mut rpc), 1);
    assert_eq!(rpc.stats().duplicates, 1);
}

#[test]
fn replies_must_be_encrypted_to_us_and_match_a_call() {
    let (mut node, mut rpc) = server();
    let other = Identity::from_secret([4; 32]);
    let result = Message::Result(CallResult {
        id: CallId([5; 16]),
        server: eid("dtn://other/"),
        value: Bytes::from_static(b"x"),
        files: vec![],
        run_ms: 1,
    });
    let body = result.encode().unwrap();
    // Signed but not encrypted: not what a Ferry server sends.
    let plain = other.seal(&body, None, [1; 32]).unwrap();
    deliver(&mut node, &mut rpc, plain, 1);
    assert_eq!(rpc.stats().forged, 1);
    // Encrypted to us but for a call we never made.
    let me = rpc.public_key();
    let sealed = other.seal(&body, Some(&me), [1; 32]).unwrap();
    deliver(&mut node, &mut rpc, sealed, 2);
    assert_eq!(rpc.stats().unmatched, 1);
}

#[test]
fn text_stands_for_a_declared_number_or_flag_only_when_it_is_one() {
    use rpc::{ParamType as T, check_params};
    use wire::rpc::Value as V;
    let text = |s: &str| V::Text(s.into());
    assert_eq!(
        check_params(
            &[T::Int, T::Float, T::Bool, T::Text, T::Float],
            &[text("-42"), text("0.5"), text("true"), text("7"), V::Int(3)]
        ),
        Ok(vec![
            V::Int(-42),
            V::Float(0.5),
            V::Bool(true),
            text("7"),
            V::Int(3)
        ])
    );
    for (ty, bad) in [
        (T::Int, "4.2"),
        (T::Int, " 4"),
        (T::Bool, "yes"),
        (T::Float, ""),
    ] {
        let e = check_params(&[ty], &[text(bad)]).unwrap_err();
        assert!(
            matches!(e, rpc::ParamError::Unreadable { position: 1, .. }),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("parameter 1 must be"), "{e}");
    }
    // Typed values are never converted to text, nor numbers to flags.
    assert!(check_params(&[T::Text], &[V::Int(1)]).is_err());
    assert!(check_params(&[T::Bool], &[V::Int(1)]).is_err());
    assert!(check_params(&[T::Int, T::Int], &[V::Int(1)]).is_err());
    assert!(check_params(&[T::Text], &[text("a\0b")]).is_err());
}

/// The data-channel payload a client with the server's key pinned stores for a call with
/// `secret` as its file, by dtn; `stand_in`: the client seals files with stand-ins.
fn sealed_file_for_the_server(secret: &Bytes, stand_in: bool) -> Bytes {
    let server_id = Identity::from_secret([2; 32]);
    let mut client_node = Node::new(
        NodeConfig::new(eid("dtn://client/")),
        Box::new(MemoryStore::new(1 << 24)),
        NOW,
    );
    let mut config = RpcConfig::default();
    config
        .pinned_keys
        .push((eid("dtn://server/"), server_id.public()));
    let mut client = Rpc::new(
        config,
        Identity::from_secret([1; 32]),
        [8; 32],
        &mut client_node,
        NOW,
    );
    if stand_in {
        client.stand_in_file_seals();
    }
    let mut request = rpc::CallRequest::new(
        rpc::Target::Node(eid("dtn://server/")),
        "photo",
        vec![rpc::Param::File {
            name: "in.bin".into(),
            content: secret.clone(),
        }],
    );
    request.transport = Transport::Dtn;
    client.call(NOW, &mut client_node, request).unwrap();
    let store = client_node.store();
    let payloads: Vec<Bytes> = store
        .list()
        .unwrap()
        .iter()
        .filter_map(|m| store.get(&m.id).unwrap())
        .filter(|b| b.bundle.primary.destination == eid("dtn://server/~rpc-data"))
        .map(|b| b.bundle.payload.data.clone())
        .collect();
    assert_eq!(payloads.len(), 1);
    payloads[0].clone()
}

/// The file a server keeps after `sealed` is delivered to its data channel, if any.
fn file_the_server_keeps(sealed: &Bytes, secret: &Bytes, stand_in: bool) -> Option<Bytes> {
    let (mut node, mut rpc) = server();
    if stand_in {
        rpc.stand_in_file_seals();
    }
    let event = Event::Delivered(Delivery {
        id: BundleId {
            source: eid("dtn://client/~rpc-data"),
            creation: CreationTimestamp {
                time: NOW,
                sequence: 1,
            },
            fragment: None,
        },
        destination: eid("dtn://server/~rpc-data"),
        class: Class::Dtn,
        created: NOW,
        expiry: NOW + Duration::from_millis(60_000),
        payload: sealed.clone(),
    });
    rpc.handle_node_event(NOW, &mut node, &event);
    rpc.file(&node, blake3::hash(secret).as_bytes())
}

#[test]
fn files_for_a_known_node_travel_sealed_and_open_at_the_server() {
    let secret = Bytes::from(vec![0x5a; 20_000]);
    let sealed = sealed_file_for_the_server(&secret, false);
    // What waits in the client's store for the data channel is not the file.
    assert_ne!(sealed, secret);
    assert!(
        !sealed.windows(64).any(|w| w == &secret[..64]),
        "the file's bytes show through"
    );
    // The server opens it: the file it keeps is the plaintext, by its hash.
    assert_eq!(file_the_server_keeps(&sealed, &secret, false), Some(secret));
}

/// The simulator's stand-ins: a real envelope's length, the file in the clear, opened only by
/// an engine told to expect them (every engine of a simulated network is).
#[test]
fn stand_in_file_seals_have_a_real_envelopes_length_and_open_only_where_expected() {
    let secret = Bytes::from(vec![0x5a; 20_000]);
    let real = sealed_file_for_the_server(&secret, false);
    let stand_in = sealed_file_for_the_server(&secret, true);
    assert_eq!(stand_in.len(), real.len());
    assert_eq!(
        stand_in[..66],
        real[..66],
        "version, flags, sender, recipient"
    );
    assert!(stand_in.windows(64).any(|w| w == &secret[..64]));
    assert_eq!(
        file_the_server_keeps(&stand_in, &secret, true),
        Some(secret.clone())
    );
    assert_eq!(file_the_server_keeps(&stand_in, &secret, false), None);
    assert_eq!(file_the_server_keeps(&real, &secret, true), Some(secret));
}

// ----- the file budget -----

/// A client whose calls go by dtn to `dtn://server/` (key pinned), keeping `budget` bytes of
/// data-channel files.
fn client(node: &mut Node, budget: u64, now: DtnTime) -> Rpc {
    let config = RpcConfig {
        max_file_bytes: budget,
        pinned_keys: vec![(
            eid("dtn://server/"),
            Identity::from_secret([2; 32]).public(),
        )],
        ..RpcConfig::default()
    };
    Rpc::new(config, Identity::from_secret([1; 32]), [8; 32], node, now)
}

fn client_node() -> Node {
    Node::new(
        NodeConfig::new(eid("dtn://client/")),
        Box::new(MemoryStore::new(1 << 24)),
        NOW,
    )
}

fn call_server(rpc: &mut Rpc, node: &mut Node, params: Vec<rpc::Param>) -> CallId {
    let mut request =
        rpc::CallRequest::new(rpc::Target::Node(eid("dtn://server/")), "photo", params);
    request.transport = Transport::Dtn;
    rpc.call(NOW, node, request).unwrap()
}

fn deliver_to_client(node: &mut Node, rpc: &mut Rpc, now: DtnTime, demux: &str, payload: Bytes) {
    let event = Event::Delivered(Delivery {
        id: BundleId {
            source: eid(&format!("dtn://server/{demux}")),
            creation: CreationTimestamp {
                time: now,
                sequence: 0,
            },
            fragment: None,
        },
        destination: eid(&format!("dtn://client/{demux}")),
        class: Class::Dtn,
        created: now,
        expiry: NOW + Duration::from_millis(200_000),
        payload,
    });
    assert!(
        rpc.handle_node_event(now, node, &event),
        "the engine's endpoint"
    );
}

/// The server's result for `id`, naming `files`, at `now`.
fn deliver_result(
    node: &mut Node,
    rpc: &mut Rpc,
    now: DtnTime,
    id: CallId,
    files: Vec<wire::rpc::FileRef>,
) {
    let result = Message::Result(CallResult {
        id,
        server: eid("dtn://server/"),
        value: Bytes::from_static(b"ok"),
        files,
        run_ms: 1,
    });
    let to = rpc.public_key();
    let sealed = Identity::from_secret([2; 32])
        .seal(
            &result.encode().unwrap(),
            Some(&to),
            [now.as_millis() as u8; 32],
        )
        .unwrap();
    deliver_to_client(node, rpc, now, "~rpc", Bytes::from(sealed));
}

/// The server's result for `id`, one file, then the file itself, at `now`.
fn answer_with_file(node: &mut Node, rpc: &mut Rpc, now: DtnTime, id: CallId, file: &Bytes) {
    let named = wire::rpc::FileRef {
        hash: *blake3::hash(file).as_bytes(),
        size: file.len() as u64,
        name: "picture.pgm".into(),
    };
    deliver_result(node, rpc, now, id, vec![named]);
    deliver_to_client(node, rpc, now, "~rpc-data", file.clone());
}

fn dropped_lines(rpc: &Rpc, id: &CallId) -> Vec<String> {
    rpc.call_view(id)
        .unwrap()
        .timeline
        .into_iter()
        .map(|(_, text)| text)
        .filter(|t| t.contains("dropped to make room"))
        .collect()
}

#[test]
fn a_full_file_budget_drops_the_oldest_finished_results_never_a_waiting_calls_parameter() {
    use rpc::CallState::{Succeeded, Waiting};
    let mut node = client_node();
    let mut rpc = client(&mut node, 100_000, NOW);
    let file = |tag: u8, size: usize| Bytes::from(vec![tag; size]);
    let hash = |f: &Bytes| *blake3::hash(f).as_bytes();
    let held = |rpc: &Rpc, node: &Node, f: &Bytes| rpc.file(node, &hash(f)).is_some();
    let state = |rpc: &Rpc, id: &CallId| rpc.call_view(id).unwrap().state;
    let (param, rb, rc, rd, re) = (
        file(1, 30_000),
        file(2, 30_000),
        file(3, 30_000),
        file(4, 30_000),
        file(5, 80_000),
    );
    // A waits, holding its 30 kB parameter. F's result is that same file and F finishes first.
    let a = call_server(
        &mut rpc,
        &mut node,
        vec![rpc::Param::File {
            name: "in.bin".into(),
            content: param.clone(),
        }],
    );
    let [f, b, c, d, e] = [(); 5].map(|_| call_server(&mut rpc, &mut node, vec![]));
    answer_with_file(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(500),
        f,
        &param,
    );
    answer_with_file(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(1_000),
        b,
        &rb,
    );
    answer_with_file(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(2_000),
        c,
        &rc,
    );
    for id in [f, b, c] {
        assert_eq!(state(&rpc, &id), Succeeded, "{:#?}", rpc.call_view(&id));
    }
    // 90 kB held; D's 30 kB result needs 20 kB: B's result goes (F's is A's parameter).
    answer_with_file(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(3_000),
        d,
        &rd,
    );
    assert_eq!(state(&rpc, &d), Succeeded, "{:#?}", rpc.call_view(&d));
    assert_eq!(state(&rpc, &a), Waiting);
    assert!(
        held(&rpc, &node, &param),
        "a waiting call's parameter was dropped"
    );
    assert!(!held(&rpc, &node, &rb));
    assert!(held(&rpc, &node, &rc) && held(&rpc, &node, &rd));
    let lines = dropped_lines(&rpc, &b);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("result file picture.pgm (")
            && lines[0]
                .ends_with("dropped to make room for newer files (file budget 100000 bytes)"),
        "{}",
        lines[0]
    );
    for id in [a, f, c, d] {
        assert!(dropped_lines(&rpc, &id).is_empty());
    }
    assert_eq!(rpc.stats().files_refused, 0);
    // E's 80 kB result would fit only if A's parameter went too: it is refused, and the results
    // of C and D are not dropped for nothing.
    answer_with_file(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(4_000),
        e,
        &re,
    );
    assert_eq!(rpc.stats().files_refused, 1);
    assert_eq!(state(&rpc, &e), Waiting);
    for f in [&param, &rc, &rd] {
        assert!(held(&rpc, &node, f));
    }
    // What B's timeline says is in its durable record: a restarted engine still says it.
    let rpc = client(&mut node, 100_000, NOW + Duration::from_millis(5_000));
    assert_eq!(dropped_lines(&rpc, &b).len(), 1);
    assert_eq!(rpc.file(&node, &hash(&rb)), None);
}

// ----- deferred record writes -----

#[test]
fn deferred_records_reach_the_store_only_when_written_and_then_outlive_the_engine() {
    let mut node = client_node();
    let mut rpc = client(&mut node, 1 << 20, NOW);
    rpc.defer_record_writes(true);
    let id = call_server(
        &mut rpc,
        &mut node,
        vec![rpc::Param::Value(Value::Text("x".into()))],
    );
    let pending = |node: &Node| {
        node.store()
            .rpc_scan(store::RpcTable::Pending)
            .unwrap()
            .len()
    };
    // The call is made (its bundle is with the node) but its record waits for the shell.
    assert!(rpc.call_view(&id).is_some());
    assert_eq!(pending(&node), 0);
    rpc.write_records(&mut node);
    assert_eq!(pending(&node), 1);
    // Written once: a second write with nothing changed adds nothing.
    rpc.write_records(&mut node);
    assert_eq!(pending(&node), 1);

    // What was written is what a restarted engine finds.
    let store = node.into_store();
    let mut node = Node::new(
        NodeConfig::new(eid("dtn://client/")),
        store,
        NOW + Duration::from_millis(1),
    );
    let restarted = client(&mut node, 1 << 20, NOW + Duration::from_millis(1));
    assert_eq!(restarted.call_ids(), vec![id]);
}

// ----- row keys -----

#[test]
fn records_sort_by_time_and_rows_of_the_old_bare_form_are_kept_under_their_key() {
    // A served call's dedup row: the call's deadline (which every copy of the call carries,
    // so a late copy finds the row), then caller key and call id.
    let (mut node, mut rpc) = server();
    let client_identity = Identity::from_secret([1; 32]);
    let body = call(1).encode().unwrap();
    let sealed = client_identity
        .seal(&body, Some(&rpc.public_key()), [7; 32])
        .unwrap();
    deliver(&mut node, &mut rpc, sealed, 1);
    let dedup = node.store().rpc_scan(store::RpcTable::Dedup).unwrap();
    assert_eq!(dedup.len(), 1);
    assert_eq!(dedup[0].0.len(), 8 + 32 + 16);
    assert_eq!(
        dedup[0].0[..8],
        (NOW + Duration::from_millis(60_000)).to_be_bytes()
    );
    assert_eq!(dedup[0].0[40..], [1; 16]);

    // A call's row: the time it was made, then its id, which also carries that time, after
    // its random part (so the row is found by the id alone, and ids differ from the start).
    let mut node = client_node();
    let mut rpc = client(&mut node, 1 << 20, NOW);
    let id = call_server(&mut rpc, &mut node, vec![]);
    let rows = |node: &Node| node.store().rpc_scan(store::RpcTable::Pending).unwrap();
    let row = rows(&node).remove(0);
    assert_eq!(row.0.len(), 24);
    assert_eq!(row.0[..8], NOW.to_be_bytes());
    assert_eq!(row.0[8..], id.0);
    assert_eq!(id.0[8..], NOW.to_be_bytes());
    assert!(id.0[0] & 0x80 != 0, "the first bit marks the layout");

    // A row in the form an earlier version wrote (the bare id) loads, changes and goes under
    // its own key: never a second row for the same call.
    let store = node.store_mut();
    store.rpc_remove(store::RpcTable::Pending, &row.0).unwrap();
    store
        .rpc_put(store::RpcTable::Pending, &id.0, &row.1)
        .unwrap();
    let mut node = Node::new(
        NodeConfig::new(eid("dtn://client/")),
        node.into_store(),
        NOW + Duration::from_millis(1),
    );
    let mut rpc = client(&mut node, 1 << 20, NOW + Duration::from_millis(1));
    assert_eq!(rpc.call_ids(), vec![id]);
    rpc.cancel(NOW + Duration::from_millis(2), &mut node, id)
        .unwrap();
    let after = rows(&node);
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].0.as_ref(), id.0);
    assert!(rpc.forget(&mut node, id));
    assert!(rows(&node).is_empty());
}

#[test]
fn a_result_file_lives_as_long_as_its_call_is_kept_not_just_until_the_deadline() {
    let mut node = client_node();
    let mut rpc = client(&mut node, 1 << 20, NOW);
    let id = call_server(&mut rpc, &mut node, vec![]);
    let picture = Bytes::from(vec![7u8; 5_000]);
    let hash = *blake3::hash(&picture).as_bytes();
    answer_with_file(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(1_000),
        id,
        &picture,
    );
    assert_eq!(rpc.call_view(&id).unwrap().state, rpc::CallState::Succeeded);
    let run_until = |rpc: &mut Rpc, node: &mut Node, until: DtnTime| {
        while let Some(t) = rpc.poll_timeout().filter(|t| *t <= until) {
            rpc.handle_timeout(t, node);
        }
    };
    // The file's bundle expired at NOW + 200 s; the call is kept for an hour after it finished.
    run_until(
        &mut rpc,
        &mut node,
        NOW + Duration::from_millis(30 * 60_000),
    );
    assert_eq!(rpc.file(&node, &hash), Some(picture.clone()));
    // A restart reads the file's stored (past) expiry; the next sweep keeps the file again.
    let store = node.into_store();
    let mut node = Node::new(
        NodeConfig::new(eid("dtn://client/")),
        store,
        NOW + Duration::from_millis(30 * 60_000),
    );
    let mut rpc = client(&mut node, 1 << 20, NOW + Duration::from_millis(30 * 60_000));
    run_until(
        &mut rpc,
        &mut node,
        NOW + Duration::from_millis(50 * 60_000),
    );
    assert_eq!(rpc.file(&node, &hash), Some(picture));
    // Once the call goes, so does its file.
    run_until(
        &mut rpc,
        &mut node,
        NOW + Duration::from_millis(63 * 60_000),
    );
    assert!(rpc.call_view(&id).is_none());
    assert_eq!(rpc.file(&node, &hash), None);
}

#[test]
fn a_call_whose_files_do_not_fit_the_file_budget_is_refused_and_nothing_is_kept() {
    let mut node = client_node();
    let mut rpc = client(&mut node, 100_000, NOW);
    let file = |tag: u8| rpc::Param::File {
        name: "in.bin".into(),
        content: Bytes::from(vec![tag; 60_000]),
    };
    // A waiting call's parameter is never dropped: the second 60 kB file cannot fit.
    let first = call_server(&mut rpc, &mut node, vec![file(1)]);
    let mut request = rpc::CallRequest::new(
        rpc::Target::Node(eid("dtn://server/")),
        "photo",
        vec![file(2)],
    );
    request.transport = Transport::Dtn;
    let err = rpc.call(NOW, &mut node, request).unwrap_err();
    assert!(
        matches!(
            err,
            rpc::CallError::FileBudget {
                needed: 60_000,
                budget: 100_000
            }
        ),
        "{err}"
    );
    assert_eq!(rpc.call_ids(), vec![first]);
    let files = node.store().rpc_scan(store::RpcTable::Files).unwrap();
    assert_eq!(files.len(), 1, "only the first call's file");
    // The same file again costs nothing new: it fits.
    let again = call_server(&mut rpc, &mut node, vec![file(1)]);
    let mut made = vec![first, again];
    made.sort();
    let mut ids = rpc.call_ids();
    ids.sort();
    assert_eq!(ids, made);
}

#[test]
fn the_running_fact_counts_this_servers_executions_whatever_facts_the_shell_sets() {
    let (mut node, mut rpc) = server_with(|config| {
        config.accept = rpc::require::Requirement::parse("running < 1").unwrap();
    });
    let client = Identity::from_secret([1; 32]);
    let to = rpc.public_key();
    let sealed = |id: u8| {
        client
            .seal(&call(id).encode().unwrap(), Some(&to), [id; 32])
            .unwrap()
    };

    deliver(&mut node, &mut rpc, sealed(1), 1);
    assert_eq!(executions(&mut rpc), 1, "nothing runs yet: accepted");
    // The shell refreshes the facts (without `running`): one execution still runs.
    let mut facts = rpc::require::Facts::new();
    facts.set("battery", 80.0);
    rpc.set_facts(facts);
    deliver(&mut node, &mut rpc, sealed(2), 2);
    assert_eq!(
        executions(&mut rpc),
        0,
        "one runs: refused by `running < 1`"
    );
    assert_eq!(rpc.stats().calls_rejected, 1);
    assert_eq!(rpc.stats().calls_accepted, 1);
}

#[test]
fn a_finished_calls_record_drops_the_sealed_call_and_still_restores_with_its_result() {
    let mut node = client_node();
    let mut rpc = client(&mut node, 1 << 20, NOW);
    let id = call_server(
        &mut rpc,
        &mut node,
        vec![rpc::Param::Value(Value::Text("x".repeat(500)))],
    );
    let record_len = |node: &Node| {
        let rows = node.store().rpc_scan(store::RpcTable::Pending).unwrap();
        assert_eq!(rows.len(), 1);
        rows[0].1.len()
    };
    let pending = record_len(&node);
    answer_with_file(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(10),
        id,
        &Bytes::from_static(b"P5"),
    );
    assert_eq!(rpc.call_state(&id), Some(rpc::CallState::Succeeded));
    // The sealed call (the 500-byte parameter, encrypted) was kept only to send it again.
    let finished = record_len(&node);
    assert!(
        finished + 500 < pending + 200,
        "pending {pending} bytes, finished {finished}"
    );

    let store = node.into_store();
    let mut node = Node::new(
        NodeConfig::new(eid("dtn://client/")),
        store,
        NOW + Duration::from_millis(20),
    );
    let restarted = client(&mut node, 1 << 20, NOW + Duration::from_millis(20));
    let view = restarted.call_view(&id).expect("kept");
    assert_eq!(view.state, rpc::CallState::Succeeded);
    assert_eq!(view.replies.len(), 1);
    assert_eq!(view.call.params, vec![Value::Text("x".repeat(500))]);
}

#[test]
fn frames_on_a_stream_are_read_whole_however_the_pieces_cut_them() {
    let client = Identity::from_secret([1; 32]);
    let framed = |id: u8, to: &seal::PublicKey| {
        let sealed = client
            .seal(&call(id).encode().unwrap(), Some(to), [id; 32])
            .unwrap();
        let mut frame = (sealed.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&sealed);
        frame
    };
    // Two frames in one piece; one frame cut in three (inside its length, inside its body);
    // a frame's end and the next one's start in one piece.
    for cuts in [vec![], vec![2, 40], vec![1, 3, 5], vec![300]] {
        let (mut node, mut rpc) = server_with(|config| config.procedures[0].max_concurrent = 2);
        let to = rpc.public_key();
        let mut bytes = framed(1, &to);
        bytes.extend(framed(2, &to));
        let stream = node::stream::StreamId(7);
        let opened = Event::Stream(node::stream::StreamEvent::Opened {
            id: stream,
            local: eid("dtn://server/~rpc"),
            remote: eid("dtn://client/~rpc"),
        });
        assert!(rpc.handle_node_event(NOW, &mut node, &opened));
        let mut at = 0;
        for end in cuts.iter().copied().chain([bytes.len()]) {
            let piece = Event::Stream(node::stream::StreamEvent::Data {
                id: stream,
                data: Bytes::copy_from_slice(&bytes[at..end]),
            });
            assert!(rpc.handle_node_event(NOW, &mut node, &piece));
            at = end;
        }
        assert_eq!(executions(&mut rpc), 2, "cut at {cuts:?}");
        assert_eq!(rpc.stats().forged, 0, "cut at {cuts:?}");
    }
}

// ----- finished calls leave memory -----

/// The server's result for `id`, no files, at `now`.
fn answer(node: &mut Node, rpc: &mut Rpc, now: DtnTime, id: CallId) {
    deliver_result(node, rpc, now, id, vec![]);
}

fn run_timers_until(rpc: &mut Rpc, node: &mut Node, until: DtnTime) {
    while let Some(t) = rpc.poll_timeout().filter(|t| *t <= until) {
        rpc.handle_timeout(t, node);
    }
}

fn rows(node: &Node, table: store::RpcTable) -> usize {
    node.store().rpc_scan(table).unwrap().len()
}

#[test]
fn finished_calls_beyond_the_bound_leave_memory_and_are_read_back_from_the_store() {
    use rpc::CallState::Succeeded;
    let mut node = client_node();
    let config = RpcConfig {
        finished_in_memory: 2,
        pinned_keys: vec![(
            eid("dtn://server/"),
            Identity::from_secret([2; 32]).public(),
        )],
        ..RpcConfig::default()
    };
    let mut rpc = Rpc::new(
        config.clone(),
        Identity::from_secret([1; 32]),
        [8; 32],
        &mut node,
        NOW,
    );
    let ids: Vec<CallId> = (0..5)
        .map(|_| call_server(&mut rpc, &mut node, vec![]))
        .collect();
    // A waiting call never leaves memory, however many there are.
    assert_eq!(rpc.calls_in_memory().0, 5);
    for (i, id) in ids.iter().enumerate() {
        answer(
            &mut node,
            &mut rpc,
            NOW + Duration::from_millis(10 * (i as u64 + 1)),
            *id,
        );
    }
    // The two that finished last stay; the others live in the store only.
    let sorted = |mut ids: Vec<CallId>| {
        ids.sort();
        ids
    };
    assert_eq!(sorted(rpc.call_ids()), sorted(ids[3..].to_vec()));
    assert_eq!(rpc.calls_in_memory().0, 2);
    assert_eq!(rows(&node, store::RpcTable::Pending), 5);
    for id in &ids[..3] {
        assert!(rpc.call_view(id).is_none());
        let record = rpc
            .call_record(&node, id)
            .expect("read back from the store");
        assert_eq!(record.state, Succeeded);
        assert_eq!(record.replies.len(), 1);
        assert_eq!(record.call.id, *id);
        assert!(
            record.timeline.iter().any(|(_, t)| t.contains("succeeded")),
            "{:?}",
            record.timeline
        );
    }
    // A late copy of a result for a call that left memory is no call of ours any more.
    let unmatched = rpc.stats().unmatched;
    answer(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(100),
        ids[0],
    );
    assert_eq!(rpc.stats().unmatched, unmatched + 1);
    assert_eq!(rpc.call_record(&node, &ids[0]).unwrap().replies.len(), 1);

    // Cancelling one that left memory is cancelling a call that ended: nothing changes.
    rpc.cancel(NOW + Duration::from_millis(101), &mut node, ids[0])
        .unwrap();
    assert_eq!(rpc.call_record(&node, &ids[0]).unwrap().state, Succeeded);
    assert!(
        rpc.cancel(NOW + Duration::from_millis(101), &mut node, CallId([9; 16]))
            .is_err()
    );

    // Forgetting one that left memory removes its row.
    assert!(rpc.forget(&mut node, ids[0]));
    assert!(rpc.call_record(&node, &ids[0]).is_none());
    assert!(!rpc.forget(&mut node, ids[0]));
    assert_eq!(rows(&node, store::RpcTable::Pending), 4);

    // A restart loads no more than the bound (reading the store in the order the calls were
    // made, the latest stay), and still finds the rest by id.
    let store = node.into_store();
    let mut node = Node::new(
        NodeConfig::new(eid("dtn://client/")),
        store,
        NOW + Duration::from_millis(200),
    );
    let mut rpc = Rpc::new(
        config,
        Identity::from_secret([1; 32]),
        [8; 32],
        &mut node,
        NOW + Duration::from_millis(200),
    );
    assert_eq!(rpc.calls_in_memory().0, 2);
    for id in &ids[1..] {
        assert_eq!(rpc.call_record(&node, id).unwrap().state, Succeeded);
    }

    // Within the hour they are all kept; after it, the sweep removes the rows that left memory
    // as well as the calls in it.
    run_timers_until(
        &mut rpc,
        &mut node,
        NOW + Duration::from_millis(30) + Duration::from_millis(3_599_000),
    );
    assert_eq!(rows(&node, store::RpcTable::Pending), 4);
    run_timers_until(
        &mut rpc,
        &mut node,
        NOW + Duration::from_millis(50)
            + Duration::from_millis(3_600_000)
            + Duration::from_millis(60_000),
    );
    assert_eq!(rows(&node, store::RpcTable::Pending), 0);
    assert_eq!(rpc.calls_in_memory().0, 0);
    assert!(rpc.call_record(&node, &ids[1]).is_none());
}

#[test]
fn a_late_copy_of_a_served_call_that_left_memory_gets_its_stored_reply_and_never_runs_again() {
    let (mut node, mut rpc) = server_with(|c| c.finished_in_memory = 1);
    let client = Identity::from_secret([1; 32]);
    let to = rpc.public_key();
    let sealed: Vec<Vec<u8>> = (1..=3)
        .map(|i| {
            client
                .seal(&call(i).encode().unwrap(), Some(&to), [i; 32])
                .unwrap()
        })
        .collect();
    for (i, s) in sealed.iter().enumerate() {
        deliver(&mut node, &mut rpc, s.clone(), i as u64);
        let jobs: Vec<rpc::Job> = std::iter::from_fn(|| rpc.poll_event())
            .filter_map(|e| match e {
                RpcEvent::Execute(job) => Some(job),
                _ => None,
            })
            .collect();
        assert_eq!(jobs.len(), 1);
        rpc.finished(
            NOW,
            &mut node,
            jobs[0].id,
            rpc::Outcome::Success {
                value: Bytes::from_static(b"hello"),
                files: vec![],
                run_ms: 1,
            },
        );
    }
    // One answered call is kept in memory; the dedup rows of all three are in the store.
    assert_eq!(rpc.calls_in_memory().1, 1);
    assert_eq!(rows(&node, store::RpcTable::Dedup), 3);

    // The first call arrives again (a copy that went the long way round): it is found in the
    // store, answered from there, and does not run again.
    let before = node.store().list().unwrap();
    deliver(&mut node, &mut rpc, sealed[0].clone(), 10);
    assert_eq!(executions(&mut rpc), 0, "ran twice");
    assert_eq!(rpc.stats().duplicates, 1);
    let after = node.store().list().unwrap();
    assert_eq!(after.len(), before.len() + 1, "the stored reply sent again");
    // The record keeps the reply unsealed; sealed again, it opens at the caller as the result.
    let resent = after
        .iter()
        .find(|m| !before.iter().any(|b| b.id == m.id))
        .unwrap();
    let resent = node.store().get(&resent.id).unwrap().unwrap();
    let opened = client.open(&resent.bundle.payload.data).unwrap();
    match Message::decode(&Bytes::from(opened.body)).unwrap() {
        Message::Result(r) => {
            assert_eq!(r.id, CallId([1; 16]));
            assert_eq!(&r.value[..], b"hello");
        }
        other => panic!("{other:?}"),
    }
    // A new call still runs.
    let fourth = client
        .seal(&call(4).encode().unwrap(), Some(&to), [4; 32])
        .unwrap();
    deliver(&mut node, &mut rpc, fourth, 11);
    assert_eq!(executions(&mut rpc), 1);

    // The rows go once the deadline is an hour past, including those not in memory.
    run_timers_until(
        &mut rpc,
        &mut node,
        NOW + Duration::from_millis(60_000) + Duration::from_millis(3_599_000),
    );
    assert_eq!(rows(&node, store::RpcTable::Dedup), 4);
    run_timers_until(
        &mut rpc,
        &mut node,
        NOW + Duration::from_millis(60_000)
            + Duration::from_millis(3_600_000)
            + Duration::from_millis(60_000),
    );
    // (The fourth, still running at its deadline, was stopped and answered `expired` then.)
    assert_eq!(rows(&node, store::RpcTable::Dedup), 0);
}

#[test]
fn a_finished_call_takes_its_timer_with_it() {
    let mut node = client_node();
    let mut rpc = client(&mut node, 1 << 20, NOW);
    run_timers_until(&mut rpc, &mut node, NOW);
    let sweep = rpc.poll_timeout().unwrap();
    let mut request = rpc::CallRequest::new(rpc::Target::Node(eid("dtn://server/")), "x", vec![]);
    request.transport = Transport::Dtn;
    request.deadline = Some(NOW + Duration::from_millis(10_000));
    let id = rpc.call(NOW, &mut node, request).unwrap();
    assert_eq!(
        rpc.poll_timeout(),
        Some(NOW + Duration::from_millis(10_000)),
        "armed for its deadline"
    );
    answer(&mut node, &mut rpc, NOW + Duration::from_millis(5), id);
    // Nothing is due at the deadline of a call that ended: no stale timer waits for it (a
    // busy node would hold one per call made in the last `ack_ms`).
    assert_eq!(rpc.poll_timeout(), Some(sweep));
}

#[test]
fn a_served_call_answered_at_once_takes_its_timer_with_it() {
    let (mut node, mut rpc) = server();
    run_timers_until(&mut rpc, &mut node, NOW);
    let sweep = rpc.poll_timeout().unwrap();
    let client = Identity::from_secret([1; 32]);
    let sealed = client
        .seal(&call(1).encode().unwrap(), Some(&rpc.public_key()), [1; 32])
        .unwrap();
    deliver_by(&mut node, &mut rpc, sealed, 1, Class::Datagram);
    let job = std::iter::from_fn(|| rpc.poll_event())
        .find_map(|e| match e {
            RpcEvent::Execute(job) => Some(job),
            _ => None,
        })
        .expect("the call runs");
    let ack_at = NOW + RpcConfig::default().ack_delay;
    assert!(ack_at < sweep, "the test needs the acknowledgement first");
    assert_eq!(
        rpc.poll_timeout(),
        Some(ack_at),
        "armed to acknowledge a call by datagram whose result is late"
    );
    let done = rpc::Outcome::Success {
        value: Bytes::from_static(b"hello"),
        files: Vec::new(),
        run_ms: 1,
    };
    rpc.finished(NOW + Duration::from_millis(1), &mut node, job.id, done);
    // Answered and handed over: nothing is left to do at the acknowledgement's time (a busy
    // server would otherwise hold one stale timer per call of the last `ack_delay_ms`).
    assert_eq!(rpc.poll_timeout(), Some(sweep));
}

// ----- keys: a node id is only as good as the key that signs for it -----

/// The executions `rpc` asks for, drained.
fn jobs(rpc: &mut Rpc) -> Vec<rpc::Job> {
    std::iter::from_fn(|| rpc.poll_event())
        .filter_map(|e| match e {
            RpcEvent::Execute(job) => Some(job),
            _ => None,
        })
        .collect()
}

/// `message` signed by `by` and encrypted to the node whose identity's secret is `[to; 32]`
/// (2: `dtn://server/`, 1: `dtn://client/`).
fn sealed_by(by: &Identity, to: u8, message: &Message, entropy: u8) -> Vec<u8> {
    let to = Identity::from_secret([to; 32]).public();
    by.seal(&message.encode().unwrap(), Some(&to), [entropy; 32])
        .unwrap()
}

/// The server of `server()`, running many `echo`s at once.
fn busy_server() -> (Node, Rpc) {
    server_with(|c| c.procedures[0].max_concurrent = 16)
}

#[test]
fn a_call_in_the_name_of_a_known_caller_signed_by_another_key_is_never_run() {
    let (mut node, mut rpc) = busy_server();
    let genuine = Identity::from_secret([1; 32]);
    let impostor = Identity::from_secret([3; 32]);
    // The genuine caller's first call teaches its key.
    deliver(&mut node, &mut rpc, sealed_by(&genuine, 2, &call(1), 1), 1);
    let ran = jobs(&mut rpc);
    assert_eq!(ran.len(), 1);
    assert_eq!(ran[0].caller, eid("dtn://client/"));
    let known = rpc.keys();
    assert_eq!(known.len(), 1);
    assert_eq!(
        (&known[0].node, known[0].key, known[0].source.name()),
        (&eid("dtn://client/"), genuine.public(), "call")
    );
    let stored_before = node.store().list().unwrap().len();

    // Another key calls as dtn://client/: a new call, and a copy of the genuine call's id (which
    // would be a new call of its own, keyed by the impostor's key).
    deliver(&mut node, &mut rpc, sealed_by(&impostor, 2, &call(2), 2), 2);
    deliver(&mut node, &mut rpc, sealed_by(&impostor, 2, &call(1), 3), 3);
    let events: Vec<RpcEvent> = std::iter::from_fn(|| rpc.poll_event()).collect();
    assert!(
        !events.iter().any(|e| matches!(e, RpcEvent::Execute(_))),
        "a call in another node's name ran: {events:?}"
    );
    assert_eq!(rpc.stats().key_mismatches, 2);
    assert_eq!(rpc.stats().calls_rejected, 0, "nothing is answered");
    assert_eq!(
        node.store().list().unwrap().len(),
        stored_before,
        "nothing is sent to the impersonated node or the impostor"
    );
    // The operator is told once, and sees the presented key next to the known one.
    let told: Vec<&RpcEvent> = events
        .iter()
        .filter(|e| matches!(e, RpcEvent::KeyMismatch { .. }))
        .collect();
    assert_eq!(
        told,
        [&RpcEvent::KeyMismatch {
            node: eid("dtn://client/"),
            known: genuine.public(),
            presented: impostor.public(),
            message: "call",
        }]
    );
    let presented = rpc.keys()[0].presented.unwrap();
    assert_eq!((presented.key, presented.messages), (impostor.public(), 2));

    // Nor can a caller give itself a longer id of the node: `FERRY_CALLER` is a node id.
    let mut longer = call(4);
    if let Message::Call(c) = &mut longer {
        c.caller = eid("dtn://client/admin");
    }
    deliver(&mut node, &mut rpc, sealed_by(&impostor, 2, &longer, 4), 4);
    assert_eq!(executions(&mut rpc), 0, "a caller that is no node id ran");

    // A cancel in the genuine caller's name is a mismatch too (and cancels nothing).
    let cancel = Message::Cancel(wire::rpc::Cancel {
        id: CallId([1; 16]),
        caller: eid("dtn://client/"),
    });
    deliver(&mut node, &mut rpc, sealed_by(&impostor, 2, &cancel, 5), 5);
    assert_eq!(rpc.stats().key_mismatches, 3);
    assert!(
        !std::iter::from_fn(|| rpc.poll_event()).any(|e| matches!(e, RpcEvent::Abort { .. })),
        "the genuine call was stopped"
    );

    // The genuine caller still calls.
    deliver(&mut node, &mut rpc, sealed_by(&genuine, 2, &call(5), 6), 6);
    assert_eq!(executions(&mut rpc), 1);
}

#[test]
fn a_hello_with_another_key_is_not_answered_and_its_key_is_shown() {
    let (mut node, mut rpc) = server();
    let genuine = Identity::from_secret([1; 32]);
    let hello = |from: &Identity, entropy| {
        let m = Message::Hello(wire::rpc::Hello {
            node: eid("dtn://client/"),
        });
        from.seal(&m.encode().unwrap(), None, [entropy; 32])
            .unwrap()
    };
    deliver(&mut node, &mut rpc, hello(&genuine, 1), 1);
    assert_eq!(rpc.keys()[0].source.name(), "hello");
    let stored = node.store().list().unwrap().len();
    let reinstalled = Identity::from_secret([3; 32]);
    deliver(&mut node, &mut rpc, hello(&reinstalled, 2), 2);
    assert_eq!(rpc.key_of(&eid("dtn://client/")), Some(genuine.public()));
    assert_eq!(rpc.stats().key_mismatches, 1);
    assert_eq!(node.store().list().unwrap().len(), stored, "answered");
    assert_eq!(
        rpc.presented_key(&eid("dtn://client/")).map(|p| p.key),
        Some(reinstalled.public())
    );
}

/// A hello verified once opens again without a check of its signature (the engine remembers
/// the bytes it verified), but only those very bytes: a copy changed anywhere is still forged.
#[test]
fn a_remembered_hello_lets_no_changed_copy_through() {
    let (mut node, mut rpc) = server();
    let genuine = Identity::from_secret([1; 32]);
    let m = Message::Hello(wire::rpc::Hello {
        node: eid("dtn://client/"),
    });
    let hello = genuine.seal(&m.encode().unwrap(), None, [1; 32]).unwrap();
    deliver(&mut node, &mut rpc, hello.clone(), 1);
    deliver(&mut node, &mut rpc, hello.clone(), 2);
    assert_eq!(rpc.stats().forged, 0);
    assert_eq!(rpc.key_of(&eid("dtn://client/")), Some(genuine.public()));
    let mut seq = 3;
    for i in 0..hello.len() {
        let mut changed = hello.clone();
        changed[i] ^= 0x01;
        deliver(&mut node, &mut rpc, changed, seq);
        seq += 1;
    }
    let mut longer = hello.clone();
    longer.push(0);
    deliver(&mut node, &mut rpc, longer, seq);
    assert_eq!(rpc.stats().forged, hello.len() as u64 + 1);
    assert_eq!(rpc.stats().key_mismatches, 0);
    assert_eq!(rpc.key_of(&eid("dtn://client/")), Some(genuine.public()));
}

#[test]
fn a_reinstalled_callers_key_runs_once_the_operator_accepts_it_and_the_acceptance_is_kept() {
    let (mut node, mut rpc) = busy_server();
    let old = Identity::from_secret([1; 32]);
    let new = Identity::from_secret([3; 32]);
    deliver(&mut node, &mut rpc, sealed_by(&old, 2, &call(1), 1), 1);
    assert_eq!(executions(&mut rpc), 1);
    deliver(&mut node, &mut rpc, sealed_by(&new, 2, &call(2), 2), 2);
    assert_eq!(executions(&mut rpc), 0);

    // Accepting what was presented: the reinstalled node's copy of its call now runs.
    let client = eid("dtn://client/");
    let accepted = rpc
        .accept_key(
            NOW + Duration::from_millis(1),
            &mut node,
            &eid("dtn://client/inbox"),
            None,
        )
        .unwrap();
    assert_eq!(
        (&accepted.node, accepted.key, accepted.source.name()),
        (&client, new.public(), "accepted")
    );
    assert_eq!(rpc.presented_key(&client), None);
    deliver(&mut node, &mut rpc, sealed_by(&new, 2, &call(2), 3), 3);
    assert_eq!(executions(&mut rpc), 1);
    // And the old key is the impostor now.
    deliver(&mut node, &mut rpc, sealed_by(&old, 2, &call(3), 4), 4);
    assert_eq!(executions(&mut rpc), 0);
    assert_eq!(
        rpc.presented_key(&client).map(|p| p.key),
        Some(old.public())
    );

    // What cannot be changed is refused.
    assert!(matches!(
        rpc.accept_key(NOW, &mut node, &eid("dtn://server/"), Some(new.public())),
        Err(rpc::KeyError::OwnNode(_))
    ));
    assert!(matches!(
        rpc.accept_key(NOW, &mut node, &eid("dtn://nobody/"), None),
        Err(rpc::KeyError::NothingPresented(_))
    ));
    assert!(matches!(
        rpc.forget_key(NOW, &mut node, &eid("dtn://nobody/")),
        Err(rpc::KeyError::Unknown(_))
    ));

    // The accepted key outlives the engine, with how it came.
    drop(rpc);
    let mut echo = ProcedureSpec::new("echo", vec![ParamType::Text]);
    echo.max_concurrent = 16;
    let config = RpcConfig {
        procedures: vec![echo],
        ..RpcConfig::default()
    };
    let mut rpc = Rpc::new(
        config,
        Identity::from_secret([2; 32]),
        [9; 32],
        &mut node,
        NOW + Duration::from_millis(2),
    );
    // The two calls the dropped engine started never finished, and this test's shell kept no
    // record that their executions began: the restarted engine runs them now.
    assert_eq!(executions(&mut rpc), 2);
    let known = rpc.keys();
    assert_eq!(
        (known[0].key, known[0].source.name(), known[0].since),
        (
            new.public(),
            "accepted",
            Some(NOW + Duration::from_millis(1))
        )
    );

    // Forgetting it: the next caller's key is learnt again on first use.
    assert_eq!(
        rpc.forget_key(NOW + Duration::from_millis(3), &mut node, &client),
        Ok(new.public())
    );
    assert!(rpc.keys().is_empty());
    deliver(&mut node, &mut rpc, sealed_by(&old, 2, &call(6), 5), 5);
    assert_eq!(executions(&mut rpc), 1);
    assert_eq!(rpc.key_of(&client), Some(old.public()));
}

/// A client of `dtn://server/` that learnt the server's key (`[2; 32]`) from its hello and made
/// a call to it by dtn.
fn client_that_knows_the_server() -> (Node, Rpc, CallId) {
    let mut node = client_node();
    let mut rpc = Rpc::new(
        RpcConfig::default(),
        Identity::from_secret([1; 32]),
        [8; 32],
        &mut node,
        NOW,
    );
    let hello = Message::Hello(wire::rpc::Hello {
        node: eid("dtn://server/"),
    });
    let sealed = Identity::from_secret([2; 32])
        .seal(&hello.encode().unwrap(), None, [1; 32])
        .unwrap();
    deliver_to_client(&mut node, &mut rpc, NOW, "~rpc", Bytes::from(sealed));
    assert!(rpc.key_of(&eid("dtn://server/")).is_some());
    let mut request =
        rpc::CallRequest::new(rpc::Target::Node(eid("dtn://server/")), "echo", vec![]);
    request.transport = Transport::Dtn;
    let id = rpc.call(NOW, &mut node, request).unwrap();
    (node, rpc, id)
}

fn result_from(server: &Identity, id: CallId, entropy: u8) -> Bytes {
    let result = Message::Result(CallResult {
        id,
        server: eid("dtn://server/"),
        value: Bytes::from_static(b"ok"),
        files: vec![],
        run_ms: 1,
    });
    Bytes::from(sealed_by(server, 1, &result, entropy))
}

fn timeline(rpc: &Rpc, id: &CallId) -> Vec<String> {
    rpc.call_view(id)
        .unwrap()
        .timeline
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

#[test]
fn a_reply_signed_by_another_key_is_ignored_with_a_line_once_and_accepting_the_key_lets_it_in() {
    let (mut node, mut rpc, id) = client_that_knows_the_server();
    let reinstalled = Identity::from_secret([5; 32]);
    for i in 0..3 {
        let reply = result_from(&reinstalled, id, i);
        deliver_to_client(
            &mut node,
            &mut rpc,
            NOW + Duration::from_millis(10) + Duration::from_millis(u64::from(i)),
            "~rpc",
            reply,
        );
    }
    let view = rpc.call_view(&id).unwrap();
    assert_eq!(view.state, rpc::CallState::Waiting);
    assert!(view.replies.is_empty());
    assert_eq!(rpc.stats().key_mismatches, 3);
    let lines: Vec<String> = timeline(&rpc, &id)
        .into_iter()
        .filter(|t| t.contains("signed by key"))
        .collect();
    assert_eq!(lines.len(), 1, "one line per call, not per copy: {lines:?}");
    let known = Identity::from_secret([2; 32]).public();
    assert_eq!(
        lines[0],
        format!(
            "a reply from dtn://server/ was signed by key {}, not the key known for it ({known}), \
             and was ignored; if dtn://server/ was reinstalled, accept its new key with \
             `ferry keys accept dtn://server/`",
            reinstalled.public()
        )
    );

    // The operator accepts the presented key: the call goes again, sealed for it, and the next
    // copy of the reply is taken.
    let before = node.store().list().unwrap().len();
    rpc.accept_key(
        NOW + Duration::from_millis(20),
        &mut node,
        &eid("dtn://server/"),
        None,
    )
    .unwrap();
    assert_eq!(node.store().list().unwrap().len(), before + 1, "sent again");
    assert!(
        timeline(&rpc, &id).iter().any(|t| t
            == "the key of dtn://server/ was accepted by the operator: the call is \
                           encrypted for it and sent again by dtn"),
        "{:?}",
        timeline(&rpc, &id)
    );
    let reply = result_from(&reinstalled, id, 9);
    deliver_to_client(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(30),
        "~rpc",
        reply,
    );
    assert_eq!(rpc.call_view(&id).unwrap().state, rpc::CallState::Succeeded);
}

#[test]
fn a_forgotten_server_key_is_learnt_again_from_the_next_reply() {
    let (mut node, mut rpc, id) = client_that_knows_the_server();
    let reinstalled = Identity::from_secret([5; 32]);
    let reply = result_from(&reinstalled, id, 1);
    deliver_to_client(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(10),
        "~rpc",
        reply.clone(),
    );
    assert_eq!(rpc.call_view(&id).unwrap().state, rpc::CallState::Waiting);
    rpc.forget_key(
        NOW + Duration::from_millis(20),
        &mut node,
        &eid("dtn://server/"),
    )
    .unwrap();
    deliver_to_client(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(30),
        "~rpc",
        reply,
    );
    assert_eq!(rpc.call_view(&id).unwrap().state, rpc::CallState::Succeeded);
    let known = rpc.keys();
    assert_eq!(
        (known[0].key, known[0].source.name()),
        (reinstalled.public(), "reply")
    );
}

#[test]
fn presented_keys_are_kept_for_a_bounded_number_of_nodes_the_oldest_going_first() {
    let (mut node, mut rpc) = server();
    let hello = |name: &str, from: &Identity, entropy: u8| {
        let m = Message::Hello(wire::rpc::Hello {
            node: eid(&format!("dtn://{name}/")),
        });
        from.seal(&m.encode().unwrap(), None, [entropy; 32])
            .unwrap()
    };
    let genuine = Identity::from_secret([1; 32]);
    let other = Identity::from_secret([3; 32]);
    const NODES: u64 = 300;
    for i in 0..NODES {
        deliver(&mut node, &mut rpc, hello(&format!("n{i}"), &genuine, 1), i);
    }
    for i in 0..NODES {
        let event = Event::Delivered(Delivery {
            id: BundleId {
                source: eid("dtn://x/~rpc"),
                creation: CreationTimestamp {
                    time: NOW,
                    sequence: 1000 + i,
                },
                fragment: None,
            },
            destination: eid("dtn://server/~rpc"),
            class: Class::Dtn,
            created: NOW,
            expiry: NOW + Duration::from_millis(60_000),
            payload: Bytes::from(hello(&format!("n{i}"), &other, 2)),
        });
        rpc.handle_node_event(NOW + Duration::from_millis(i), &mut node, &event);
    }
    let shown = rpc.keys().iter().filter(|k| k.presented.is_some()).count();
    assert!(shown < NODES as usize, "unbounded: {shown}");
    assert_eq!(rpc.stats().presented_keys_dropped, NODES - shown as u64);
    assert!(
        rpc.presented_key(&eid(&format!("dtn://n{}/", NODES - 1)))
            .is_some()
    );
    assert!(
        rpc.presented_key(&eid("dtn://n0/")).is_none(),
        "the oldest went first"
    );
}

#[test]
fn a_flood_of_new_node_ids_fills_the_learnt_keys_to_their_bound_and_never_displaces_a_known_one() {
    let (mut node, mut rpc) = server();
    let genuine = Identity::from_secret([1; 32]);
    let flooder = Identity::from_secret([3; 32]);
    let hello = |name: &str, from: &Identity| {
        let m = Message::Hello(wire::rpc::Hello {
            node: eid(&format!("dtn://{name}/")),
        });
        Bytes::from(from.seal(&m.encode().unwrap(), None, [1; 32]).unwrap())
    };
    let deliver_hello = |node: &mut Node, rpc: &mut Rpc, payload: Bytes, seq: u64| {
        let event = Event::Delivered(Delivery {
            id: BundleId {
                source: eid("dtn://x/~rpc"),
                creation: CreationTimestamp {
                    time: NOW,
                    sequence: seq,
                },
                fragment: None,
            },
            destination: eid("dtn://server/~rpc"),
            class: Class::Dtn,
            created: NOW,
            expiry: NOW + Duration::from_millis(60_000),
            payload,
        });
        rpc.handle_node_event(NOW, node, &event);
    };
    deliver_hello(&mut node, &mut rpc, hello("client", &genuine), 0);
    let flood = rpc::MAX_LEARNT_KEYS as u64 + 10;
    for i in 1..=flood {
        deliver_hello(&mut node, &mut rpc, hello(&format!("f{i}"), &flooder), i);
    }
    assert_eq!(rpc.keys().len(), rpc::MAX_LEARNT_KEYS);
    assert_eq!(rpc.stats().keys_not_learnt, 11);
    // The known node keeps its key: its impostor is still refused.
    assert_eq!(rpc.key_of(&eid("dtn://client/")), Some(genuine.public()));
    deliver(&mut node, &mut rpc, sealed_by(&flooder, 2, &call(1), 1), 1);
    assert_eq!(executions(&mut rpc), 0);
    // The operator can still accept a key.
    rpc.accept_key(NOW, &mut node, &eid("dtn://later/"), Some(genuine.public()))
        .unwrap();
    assert_eq!(rpc.key_of(&eid("dtn://later/")), Some(genuine.public()));
}

#[test]
fn a_result_naming_more_files_than_a_message_holds_is_output_too_large_and_keeps_no_file() {
    let (mut node, mut rpc) = server();
    let client = Identity::from_secret([1; 32]);
    let sealed = client
        .seal(&call(1).encode().unwrap(), Some(&rpc.public_key()), [1; 32])
        .unwrap();
    deliver(&mut node, &mut rpc, sealed, 1);
    let job = std::iter::from_fn(|| rpc.poll_event())
        .find_map(|e| match e {
            RpcEvent::Execute(job) => Some(job),
            _ => None,
        })
        .expect("the call runs");
    // 200 files (fewer than MAX_RESULT_FILES) with names long enough that the refs alone take
    // ~14 KB: over the control limit.
    let files: Vec<(String, Bytes)> = (0..200)
        .map(|i| (format!("{i:036}.txt"), Bytes::from(format!("file {i}"))))
        .collect();
    let before = node.store().list().unwrap();
    rpc.finished(
        NOW + Duration::from_millis(1),
        &mut node,
        job.id,
        rpc::Outcome::Success {
            value: Bytes::from_static(b"done"),
            files,
            run_ms: 5,
        },
    );
    assert_eq!(rows(&node, store::RpcTable::Files), 0, "no file kept");
    let after = node.store().list().unwrap();
    let replies: Vec<_> = after
        .iter()
        .filter(|m| !before.iter().any(|b| b.id == m.id))
        .collect();
    assert_eq!(replies.len(), 1, "the reply alone, no file bundle");
    let reply = node.store().get(&replies[0].id).unwrap().unwrap();
    let opened = client.open(&reply.bundle.payload.data).unwrap();
    match Message::decode(&Bytes::from(opened.body)).unwrap() {
        Message::Reject(r) => {
            assert_eq!(r.code, wire::rpc::RejectCode::OutputTooLarge);
            assert!(
                r.detail.contains("200 files") && r.detail.contains("8192-byte"),
                "{}",
                r.detail
            );
        }
        other => panic!("{other:?}"),
    }
}

// ----- executions a restart cut off, and a graceful stop -----

/// A server engine on `node`'s store, `echo` declared idempotent or not.
fn restarted_server(node: Node, idempotent: bool) -> (Node, Rpc) {
    restarted_server_with(node, |config| {
        let mut echo = ProcedureSpec::new("echo", vec![ParamType::Text]);
        echo.idempotent = idempotent;
        config.procedures.push(echo);
    })
}

/// A server engine on `node`'s store 10 ms later, its configuration the default changed by
/// `change`.
fn restarted_server_with(node: Node, change: impl FnOnce(&mut RpcConfig)) -> (Node, Rpc) {
    let mut node = Node::new(
        NodeConfig::new(eid("dtn://server/")),
        node.into_store(),
        NOW + Duration::from_millis(10),
    );
    let mut config = RpcConfig::default();
    change(&mut config);
    let rpc = Rpc::new(
        config,
        Identity::from_secret([2; 32]),
        [9; 32],
        &mut node,
        NOW + Duration::from_millis(10),
    );
    (node, rpc)
}

/// The only reply to the client in `node`'s store, opened.
fn stored_reply(node: &Node, client: &Identity) -> Message {
    let list = node.store().list().unwrap();
    let replies: Vec<Message> = list
        .iter()
        .filter_map(|m| {
            let b = node.store().get(&m.id).unwrap()?;
            let opened = client.open(&b.bundle.payload.data).ok()?;
            Message::decode(&Bytes::from(opened.body)).ok()
        })
        .collect();
    assert_eq!(replies.len(), 1, "{replies:?}");
    replies.into_iter().next().unwrap()
}

#[test]
fn an_execution_a_restart_cut_off_is_asked_about_run_if_it_never_started_or_answered_result_lost() {
    let client = Identity::from_secret([1; 32]);
    let running_server = || {
        let (mut node, mut rpc) = server();
        let sealed = client
            .seal(&call(1).encode().unwrap(), Some(&rpc.public_key()), [1; 32])
            .unwrap();
        deliver(&mut node, &mut rpc, sealed, 1);
        let first = jobs(&mut rpc);
        assert_eq!(first.len(), 1);
        assert!(!first[0].resumed);
        // The process dies with the engine: no outcome is ever reported.
        drop(rpc);
        node
    };

    // The shell's record says it never started: it runs now, once, as if nothing happened.
    let (mut node, mut rpc) = restarted_server(running_server(), false);
    let resumed = jobs(&mut rpc);
    assert_eq!(resumed.len(), 1, "asked about, not answered");
    assert!(resumed[0].resumed);
    assert_eq!(rpc.running(), 1, "it counts as running meanwhile");
    assert_eq!(rpc.resume(&resumed[0], rpc::PriorRun::NeverStarted), None);
    rpc.finished(
        NOW + Duration::from_millis(20),
        &mut node,
        resumed[0].id,
        rpc::Outcome::Success {
            value: Bytes::from_static(b"hello"),
            files: vec![],
            run_ms: 1,
        },
    );
    assert!(matches!(stored_reply(&node, &client), Message::Result(_)));

    // It started: it is not run again, and its caller learns that it ran.
    let (mut node, mut rpc) = restarted_server(running_server(), false);
    let resumed = jobs(&mut rpc);
    let prior = rpc::PriorRun::Started {
        detail: "it ran to its end (exit status: 0) before the server crashed".into(),
    };
    let outcome = rpc.resume(&resumed[0], prior.clone()).expect("answered");
    rpc.finished(
        NOW + Duration::from_millis(20),
        &mut node,
        resumed[0].id,
        outcome,
    );
    match stored_reply(&node, &client) {
        Message::Reject(r) => {
            assert_eq!(r.code, wire::rpc::RejectCode::ResultLost);
            assert!(
                r.detail.contains("the procedure ran")
                    && r.detail.contains("exit status: 0")
                    && r.detail.contains("not run again"),
                "{}",
                r.detail
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(rpc.stats().interrupted, 1);

    // An idempotent procedure runs again.
    let (_node, mut rpc) = restarted_server(running_server(), true);
    let resumed = jobs(&mut rpc);
    assert_eq!(rpc.resume(&resumed[0], prior), None);
    assert_eq!(rpc.stats().reruns, 1);
}

#[test]
fn a_graceful_stop_aborts_running_executions_and_answers_server_stopped() {
    let (mut node, mut rpc) = server();
    let client = Identity::from_secret([1; 32]);
    let sealed = client
        .seal(&call(1).encode().unwrap(), Some(&rpc.public_key()), [1; 32])
        .unwrap();
    deliver(&mut node, &mut rpc, sealed, 1);
    let job = jobs(&mut rpc).remove(0);
    assert_eq!(
        rpc.stop_executions(NOW + Duration::from_millis(5), &mut node),
        1
    );
    let aborted: Vec<rpc::JobId> = std::iter::from_fn(|| rpc.poll_event())
        .filter_map(|e| match e {
            RpcEvent::Abort { job, .. } => Some(job),
            _ => None,
        })
        .collect();
    assert_eq!(aborted, [job.id]);
    assert_eq!(rpc.running(), 0);
    match stored_reply(&node, &client) {
        Message::Reject(r) => assert_eq!(r.code, wire::rpc::RejectCode::ServerStopped),
        other => panic!("{other:?}"),
    }
    // The killed execution's late outcome changes nothing; a restart finds nothing to resume.
    rpc.finished(
        NOW + Duration::from_millis(6),
        &mut node,
        job.id,
        rpc::Outcome::Success {
            value: Bytes::from_static(b"late"),
            files: vec![],
            run_ms: 1,
        },
    );
    assert_eq!(
        rpc.stop_executions(NOW + Duration::from_millis(7), &mut node),
        0
    );
    drop(rpc);
    let (_node, mut rpc) = restarted_server(node, false);
    assert!(jobs(&mut rpc).is_empty());
}

// ----- a result ends the wait that sends a call again -----

/// A client (`dtn://client/`, key `[1; 32]`) that made a call to `target` by `auto` at `NOW`,
/// due at `NOW + 300 s`.
fn client_calling(target: rpc::Target) -> (Node, Rpc, CallId) {
    let mut node = client_node();
    let mut rpc = client_rpc(&mut node);
    let mut request = rpc::CallRequest::new(target, "echo", vec![]);
    request.deadline = Some(NOW + Duration::from_millis(300_000));
    let id = rpc.call(NOW, &mut node, request).unwrap();
    (node, rpc, id)
}

fn client_rpc(node: &mut Node) -> Rpc {
    Rpc::new(
        RpcConfig::default(),
        Identity::from_secret([1; 32]),
        [8; 32],
        node,
        NOW,
    )
}

/// `message` from the server `dtn://s<n>/` (key `[n; 32]`) to the client, by datagram at `now`.
fn datagram_from(node: &mut Node, rpc: &mut Rpc, now: DtnTime, n: u8, message: Message) {
    let sealed = sealed_by(&Identity::from_secret([n; 32]), 1, &message, n);
    let event = Event::Delivered(Delivery {
        id: BundleId {
            source: eid(&format!("dtn://s{n}/~rpc")),
            creation: CreationTimestamp {
                time: now,
                sequence: 0,
            },
            fragment: None,
        },
        destination: eid("dtn://client/~rpc"),
        class: Class::Datagram,
        created: now,
        expiry: now + Duration::from_millis(60_000),
        payload: Bytes::from(sealed),
    });
    assert!(rpc.handle_node_event(now, node, &event));
}

fn ack_of(n: u8, id: CallId) -> Message {
    Message::Ack(wire::rpc::Ack {
        id,
        server: eid(&format!("dtn://s{n}/")),
    })
}

fn result_of(n: u8, id: CallId, files: Vec<wire::rpc::FileRef>) -> Message {
    Message::Result(CallResult {
        id,
        server: eid(&format!("dtn://s{n}/")),
        value: Bytes::from(format!("from s{n}")),
        files,
        run_ms: 1,
    })
}

/// Fires the engine's timers due up to `until`.
fn run_until(node: &mut Node, rpc: &mut Rpc, until: DtnTime) {
    while let Some(at) = rpc.poll_timeout().filter(|at| *at <= until) {
        rpc.handle_timeout(at, node);
    }
}

/// Bundles in the client's store: a call sent by dtn is one more.
fn stored(node: &Node) -> usize {
    node.store().list().unwrap().len()
}

/// Datagram copies of a call the client's node handed to its link (the call is broadcast).
fn calls_broadcast(node: &mut Node) -> usize {
    std::iter::from_fn(|| node.poll_transmit())
        .filter(|t| match &t.frame {
            node::Frame::Bundle(b) => node::is_broadcast(&b.primary.destination),
            _ => false,
        })
        .count()
}

#[test]
fn an_all_mode_call_answered_by_every_server_that_acknowledged_is_not_sent_again() {
    let mut node = client_node();
    // A neighbour, so that the broadcasts leave the node and can be counted.
    node.handle_link(
        NOW,
        node::LinkChange::Up {
            link: node::LinkId(1),
            peer: Some(eid("dtn://s1/")),
            mtu: None,
            bandwidth_bps: 0,
            contact: None,
        },
    );
    let mut rpc = client_rpc(&mut node);
    let mut request = rpc::CallRequest::new(rpc::Target::All, "echo", vec![]);
    request.deadline = Some(NOW + Duration::from_millis(300_000));
    let id = rpc.call(NOW, &mut node, request).unwrap();
    assert_eq!(calls_broadcast(&mut node), 1);
    let before = stored(&node);
    // s3 answers at once (its result is its only reply), s1 and s2 acknowledge, then answer
    // within the 90 s of the result timer.
    datagram_from(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(200),
        3,
        result_of(3, id, vec![]),
    );
    datagram_from(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(300),
        1,
        ack_of(1, id),
    );
    datagram_from(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(310),
        2,
        ack_of(2, id),
    );
    run_until(&mut node, &mut rpc, NOW + Duration::from_millis(20_000));
    datagram_from(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(20_000),
        1,
        result_of(1, id, vec![]),
    );
    run_until(&mut node, &mut rpc, NOW + Duration::from_millis(60_000));
    // While s1 and s2 had not answered, the call was asked again now and then (every 5 s), so
    // that a result datagram that was lost would be sent again.
    assert!(calls_broadcast(&mut node) >= 10);
    datagram_from(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(60_000),
        2,
        result_of(2, id, vec![]),
    );

    // Past the 30 s of the acknowledgement timer and the 90 s of the result timer: every
    // server that acknowledged has answered, so the call waits for more results until its
    // deadline without being sent again.
    run_until(&mut node, &mut rpc, NOW + Duration::from_millis(299_999));
    let view = rpc.call_view(&id).unwrap();
    assert_eq!(view.state, rpc::CallState::Waiting);
    assert_eq!(stored(&node), before, "sent by dtn: {:#?}", view.timeline);
    assert_eq!(calls_broadcast(&mut node), 0, "asked again by datagram");
    let lines = timeline(&rpc, &id);
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("no result") || l.starts_with("no acknowledgement")),
        "{lines:#?}"
    );

    run_until(&mut node, &mut rpc, NOW + Duration::from_millis(300_000));
    let view = rpc.call_view(&id).unwrap();
    assert_eq!(view.state, rpc::CallState::Succeeded);
    assert_eq!(view.replies.len(), 3);
    assert_eq!(
        lines,
        [
            "called all by datagram broadcast, signed",
            "result from dtn://s3/ by datagram (7 bytes, 0 files, ran 1 ms)",
            "ack from dtn://s1/ by datagram",
            "ack from dtn://s2/ by datagram",
            "result from dtn://s1/ by datagram (7 bytes, 0 files, ran 1 ms)",
            "result from dtn://s2/ by datagram (7 bytes, 0 files, ran 1 ms)",
        ]
    );
}

#[test]
fn an_all_mode_call_with_a_result_names_the_server_that_acknowledged_and_never_answered() {
    let (mut node, mut rpc, id) = client_calling(rpc::Target::All);
    let before = stored(&node);
    datagram_from(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(300),
        1,
        ack_of(1, id),
    );
    datagram_from(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(300),
        2,
        ack_of(2, id),
    );
    datagram_from(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(5_000),
        1,
        result_of(1, id, vec![]),
    );
    // s2's result keeps not coming: at the end of the result timer the timeline says so, and
    // the call, which has a result, is not sent again (the paper goes to dtn only without one).
    run_until(&mut node, &mut rpc, NOW + Duration::from_millis(299_999));
    assert_eq!(stored(&node), before);
    let lines = timeline(&rpc, &id);
    assert_eq!(
        lines.last().unwrap(),
        "dtn://s2/ acknowledged but sent no result within 90 s; a result from it is still taken \
         until the deadline",
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("no result")),
        "{lines:#?}"
    );
    // Results keep being taken: s2's comes late, and counts.
    datagram_from(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(200_000),
        2,
        result_of(2, id, vec![]),
    );
    run_until(&mut node, &mut rpc, NOW + Duration::from_millis(300_000));
    let view = rpc.call_view(&id).unwrap();
    assert_eq!(view.state, rpc::CallState::Succeeded);
    assert_eq!(view.replies.len(), 2);
}

#[test]
fn an_acknowledged_call_without_a_result_asks_again_by_dtn() {
    // The fallback the result timer is for: an ack, then no result at all.
    for target in [rpc::Target::All, rpc::Target::Any] {
        let (mut node, mut rpc, id) = client_calling(target);
        let before = stored(&node);
        datagram_from(
            &mut node,
            &mut rpc,
            NOW + Duration::from_millis(300),
            1,
            ack_of(1, id),
        );
        run_until(&mut node, &mut rpc, NOW + Duration::from_millis(90_299));
        assert_eq!(stored(&node), before);
        run_until(&mut node, &mut rpc, NOW + Duration::from_millis(90_300));
        assert_eq!(stored(&node), before + 1, "the call by dtn");
        let lines = timeline(&rpc, &id);
        assert_eq!(
            lines[lines.len() - 2..],
            [
                "no result within 90 s of the acknowledgement",
                "asking again by dtn: call sent by dtn",
            ]
        );
    }
}

#[test]
fn an_any_mode_result_waiting_for_its_file_is_not_sent_again() {
    // A quick result acknowledges the call: its file comes by dtn, which may take longer than
    // the 30 s the call waits for an acknowledgement, and the call must not go again meanwhile.
    let (mut node, mut rpc, id) = client_calling(rpc::Target::Any);
    let before = stored(&node);
    let file = Bytes::from_static(b"P5 1 1 255 x");
    let named = wire::rpc::FileRef {
        hash: *blake3::hash(&file).as_bytes(),
        size: file.len() as u64,
        name: "picture.pgm".into(),
    };
    datagram_from(
        &mut node,
        &mut rpc,
        NOW + Duration::from_millis(200),
        1,
        result_of(1, id, vec![named]),
    );
    run_until(&mut node, &mut rpc, NOW + Duration::from_millis(200_000));
    assert_eq!(rpc.call_view(&id).unwrap().state, rpc::CallState::Waiting);
    assert_eq!(stored(&node), before, "{:#?}", timeline(&rpc, &id));
    let lines = timeline(&rpc, &id);
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("no result") || l.starts_with("no acknowledgement")),
        "{lines:#?}"
    );
    let event = Event::Delivered(Delivery {
        id: BundleId {
            source: eid("dtn://s1/~rpc-data"),
            creation: CreationTimestamp {
                time: NOW + Duration::from_millis(200_000),
                sequence: 1,
            },
            fragment: None,
        },
        destination: eid("dtn://client/~rpc-data"),
        class: Class::Dtn,
        created: NOW + Duration::from_millis(200),
        expiry: NOW + Duration::from_millis(300_000),
        payload: file,
    });
    assert!(rpc.handle_node_event(NOW + Duration::from_millis(200_000), &mut node, &event));
    let view = rpc.call_view(&id).unwrap();
    assert_eq!(
        view.state,
        rpc::CallState::Succeeded,
        "{:#?}",
        view.timeline
    );
}

#[test]
fn no_hello_goes_to_a_neighbour_of_another_kind() {
    // The client's node meets `dtn://d7/`, which never answers Ferry's summary vectors (a
    // dtn7-rs router): the engine's hello waits for an answer that never comes, and at the next
    // session, with d7 known as another implementation, there is none either. (Between Ferry
    // nodes the hello follows the answer: tests/two_engines.rs.)
    let mut node = client_node();
    let mut rpc = Rpc::new(
        RpcConfig::default(),
        Identity::from_secret([1; 32]),
        [8; 32],
        &mut node,
        NOW,
    );
    let link = node::LinkId(3);
    let hellos_on_contact = |node: &mut Node, rpc: &mut Rpc, at: DtnTime| {
        node.handle_link(
            at,
            node::LinkChange::Up {
                link,
                peer: Some(eid("dtn://d7/")),
                mtu: None,
                bandwidth_bps: 0,
                contact: None,
            },
        );
        while let Some(event) = node.poll_event() {
            rpc.handle_node_event(at, node, &event);
        }
        std::iter::from_fn(|| node.poll_transmit())
            .filter(|t| {
                matches!(&t.frame, node::Frame::Bundle(b)
                    if b.primary.source.to_string().ends_with("~rpc"))
            })
            .count()
    };
    assert_eq!(
        hellos_on_contact(&mut node, &mut rpc, NOW),
        0,
        "a node met for the first time is introduced to only once it speaks Ferry"
    );
    // No summary in the grace: another implementation.
    node.handle_timeout(NOW + NodeConfig::new(eid("dtn://x/")).summary_grace);
    assert!(node.is_foreign(&eid("dtn://d7/")));
    node.handle_link(
        NOW + Duration::from_secs(30),
        node::LinkChange::Down { link },
    );
    while node.poll_transmit().is_some() {}
    // Past the hello interval, a new session: no hello.
    let later = NOW + Duration::from_secs(20 * 60);
    assert_eq!(hellos_on_contact(&mut node, &mut rpc, later), 0);
}

/// A sealed call of `call(id)` for `procedure`, to the server's key.
fn offered_procedure_sealed_call(id: u8, procedure: &str, to: &seal::PublicKey) -> Vec<u8> {
    let Message::Call(mut c) = call(id) else {
        unreachable!()
    };
    c.procedure = procedure.into();
    let client = Identity::from_secret([1; 32]);
    client
        .seal(&Message::Call(c).encode().unwrap(), Some(to), [id; 32])
        .unwrap()
}

#[test]
fn a_procedure_offered_later_runs_and_a_withdrawn_one_no_longer_does() {
    let (mut node, mut rpc) = server_with(|c| c.procedures.clear());
    let to = rpc.public_key();
    assert!(!rpc.offers("photo"));
    deliver(
        &mut node,
        &mut rpc,
        offered_procedure_sealed_call(1, "photo", &to),
        1,
    );
    assert_eq!(executions(&mut rpc), 0, "not offered yet");

    assert!(rpc.offer(ProcedureSpec::new("photo", vec![ParamType::Text])));
    assert!(rpc.offers("photo"));
    let again = rpc.offer(ProcedureSpec::new("photo", vec![]));
    assert!(!again, "a name is offered once");
    deliver(
        &mut node,
        &mut rpc,
        offered_procedure_sealed_call(2, "photo", &to),
        2,
    );
    assert_eq!(executions(&mut rpc), 1, "offered now: it runs");

    assert!(rpc.withdraw("photo"));
    assert!(!rpc.withdraw("photo"));
    deliver(
        &mut node,
        &mut rpc,
        offered_procedure_sealed_call(3, "photo", &to),
        3,
    );
    assert_eq!(executions(&mut rpc), 0, "withdrawn: it no longer runs");
}

#[test]
fn served_calls_are_listed_with_where_they_stand() {
    let (mut node, mut rpc) = server_with(|c| c.procedures[0].max_concurrent = 2);
    let client = Identity::from_secret([1; 32]);
    let to = rpc.public_key();
    assert_eq!(rpc.served_views(10), vec![]);
    for i in 1..=2u8 {
        let sealed = client
            .seal(&call(i).encode().unwrap(), Some(&to), [i; 32])
            .unwrap();
        deliver(&mut node, &mut rpc, sealed, u64::from(i));
    }
    let jobs: Vec<rpc::Job> = std::iter::from_fn(|| rpc.poll_event())
        .filter_map(|e| match e {
            RpcEvent::Execute(job) => Some(job),
            _ => None,
        })
        .collect();
    assert_eq!(jobs.len(), 2);
    let views = rpc.served_views(10);
    assert_eq!(views.len(), 2);
    for v in &views {
        assert_eq!(
            (v.state, v.procedure.as_str(), &v.caller, v.mode, v.deadline),
            (
                "running",
                "echo",
                &eid("dtn://client/"),
                Mode::Explicit,
                NOW + Duration::from_millis(60_000)
            ),
        );
    }

    // One answered: it says so; the bound cuts the listing.
    rpc.finished(
        NOW,
        &mut node,
        jobs[0].id,
        rpc::Outcome::Success {
            value: Bytes::from_static(b"hello"),
            files: vec![],
            run_ms: 1,
        },
    );
    let views = rpc.served_views(10);
    let state = |id: CallId| views.iter().find(|v| v.id == id).unwrap().state;
    assert_eq!(state(jobs[0].call), "answered");
    assert_eq!(state(jobs[1].call), "running");
    assert_eq!(rpc.served_views(1).len(), 1);
}

// ----- the served-call records a stranger can make are bounded -----

/// A call `n` from `caller` to a procedure the server does not offer, due in two hours: what a
/// peer growing the server's tables would send (refused, and the refusal recorded).
fn call_to_nothing(caller: &str, n: u8) -> Message {
    Message::Call(Call {
        id: CallId([n; 16]),
        caller: eid(caller),
        mode: Mode::Explicit,
        server: Some(eid("dtn://server/")),
        procedure: "nothing".into(),
        params: vec![],
        requirements: String::new(),
        deadline: NOW + Duration::from_secs(7_200),
        transport: Transport::Dtn,
    })
}

#[test]
fn a_flood_of_new_calls_fills_the_served_records_to_their_bound_and_dropped_calls_never_run() {
    let bounded = |c: &mut RpcConfig| {
        c.max_served_calls = 6;
        c.max_served_calls_per_caller = 4;
        // Records leave memory and are swept from the store: both ways of going are counted.
        c.finished_in_memory = 1;
    };
    let (mut node, mut rpc) = server_with(bounded);
    let flooder = Identity::from_secret([1; 32]);
    let other = Identity::from_secret([3; 32]);
    let mut seq = 0;
    let mut send = |node: &mut Node, rpc: &mut Rpc, by: &Identity, caller: &str, n: u8| {
        seq += 1;
        deliver(
            node,
            rpc,
            sealed_by(by, 2, &call_to_nothing(caller, n), n),
            seq,
        );
    };
    let replies = |node: &Node| node.store().list().unwrap().len();

    // One caller gets its share, four records; its next two calls are dropped unheard.
    for n in 1..=6 {
        send(&mut node, &mut rpc, &flooder, "dtn://client/", n);
    }
    assert_eq!(rpc.stats().calls_rejected, 4);
    assert_eq!(rpc.stats().served_caller_full, 2);
    assert_eq!(replies(&node), 4, "a dropped call gets no reply");
    // Another caller still has room, until the whole table is full.
    for n in 11..=13 {
        send(&mut node, &mut rpc, &other, "dtn://other/", n);
    }
    assert_eq!(rpc.stats().calls_rejected, 6);
    assert_eq!(rpc.stats().served_table_full, 1);
    assert_eq!(rpc.served_records(), 6);
    assert_eq!(rows(&node, store::RpcTable::Dedup), 6);
    assert_eq!(rpc.calls_in_memory().1, 1, "the rest left memory");

    // A copy of a recorded call is still answered from its record: the bound never costs a
    // call its answer. A call the node serves itself is always recorded.
    send(&mut node, &mut rpc, &flooder, "dtn://client/", 1);
    assert_eq!(rpc.stats().duplicates, 1);
    assert_eq!(replies(&node), 7);
    let own = rpc::CallRequest::new(rpc::Target::Node(eid("dtn://server/")), "nothing", vec![]);
    rpc.call(NOW, &mut node, own).expect("a call to itself");
    assert_eq!(
        rpc.stats().calls_rejected,
        7,
        "its own call is heard (and refused)"
    );
    assert_eq!(rpc.stats().served_table_full, 1);
    assert_eq!(rpc.served_records(), 7);

    // A restart finds the records and the bound holds.
    let (mut node, mut rpc) = restarted_server_with(node, bounded);
    assert_eq!(rpc.served_records(), 7);
    send(&mut node, &mut rpc, &other, "dtn://other/", 14);
    assert_eq!(rpc.stats().served_table_full, 1);
    assert_eq!(rpc.stats().calls_rejected, 0);

    // Once the records' time is up (deadline plus the hour of retention) the sweep removes
    // them and makes room: a copy of a call dropped earlier is now heard, once.
    run_timers_until(
        &mut rpc,
        &mut node,
        NOW + Duration::from_secs(7_200 + 3_600 + 120),
    );
    assert_eq!(rows(&node, store::RpcTable::Dedup), 0);
    assert_eq!(rpc.served_records(), 0);
    let mut late = call_to_nothing("dtn://client/", 5);
    if let Message::Call(c) = &mut late {
        c.deadline = NOW + Duration::from_secs(20_000);
    }
    let later = NOW + Duration::from_secs(7_200 + 3_600 + 120);
    let sealed = Bytes::from(sealed_by(&flooder, 2, &late, 5));
    for _ in 0..2 {
        seq_deliver(&mut node, &mut rpc, later, sealed.clone());
    }
    assert_eq!(rpc.stats().calls_rejected, 1);
    assert_eq!(rpc.stats().duplicates, 1);
    assert_eq!(rpc.served_records(), 1);
}

/// `payload` delivered at `now` (a bundle of its own each time).
fn seq_deliver(node: &mut Node, rpc: &mut Rpc, now: DtnTime, payload: Bytes) {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000);
    let event = Event::Delivered(Delivery {
        id: BundleId {
            source: eid("dtn://client/~rpc"),
            creation: CreationTimestamp {
                time: now,
                sequence: SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            },
            fragment: None,
        },
        destination: eid("dtn://server/~rpc"),
        class: Class::Dtn,
        created: now,
        expiry: now + Duration::from_millis(60_000),
        payload,
    });
    assert!(rpc.handle_node_event(now, node, &event));
}

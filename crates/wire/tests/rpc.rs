//! The RPC message codec (`wire::rpc`): the documented layout byte for byte, round trips of every
//! message the types can hold, the size limits, strict refusal of every malformed or non-canonical
//! input (never a panic), zero-copy `Bytes` fields, and the text forms of modes, transports, call
//! ids and reject codes.

use bytes::Bytes;
use proptest::prelude::*;
use wire::DtnTime;
use wire::rpc::{
    Ack, Call, CallId, CallResult, Cancel, EncodeError, FileRef, Hello, MAX_CONTROL_LEN,
    MAX_STDERR_TAIL, Message, Mode, Notice, Reject, RejectCode, Transport, Value,
};
use wire::{DecodeError, DecodeErrorKind as K, Eid};

// ---- helpers ----

/// Bytes from hex digits; whitespace is ignored so expected encodings can be laid out by field.
fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits");
    digits
        .chunks(2)
        .map(|pair| {
            u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex digit")
        })
        .collect()
}

fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
    Message::decode(&Bytes::copy_from_slice(bytes))
}

fn decode_err(bytes: &[u8]) -> DecodeError {
    decode(bytes).expect_err("must not decode")
}

/// The id used by the layout tests: 00 01 02 … 0f.
fn id() -> CallId {
    CallId(std::array::from_fn(|i| i as u8))
}

/// `id()` as CBOR: a 16-byte string.
const ID: &str = "50 000102030405060708090a0b0c0d0e0f";

/// 32 bytes of 0xaa, the hash of the tests' files.
const HASH: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn eid(s: &str) -> Eid {
    s.parse().expect("valid endpoint id")
}

/// Equality that compares floats by their bits: NaN equals the same NaN, and 0.0 differs from
/// -0.0, which is what a codec that keeps the bits must give back.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

fn same(a: &Message, b: &Message) -> bool {
    match (a, b) {
        (Message::Call(x), Message::Call(y)) => {
            x.params.len() == y.params.len()
                && x.params
                    .iter()
                    .zip(&y.params)
                    .all(|(p, q)| same_value(p, q))
                && Call {
                    params: Vec::new(),
                    ..x.clone()
                } == Call {
                    params: Vec::new(),
                    ..y.clone()
                }
        }
        _ => a == b,
    }
}

/// Encodes `m`, checks the bytes are `expected` and that they decode to `m` again.
fn assert_layout(m: &Message, expected: &str) {
    let expected = hex(expected);
    let bytes = m.encode().expect("encodes");
    assert_eq!(
        bytes,
        expected,
        "{} encoded as {:02x?}",
        m.kind_name(),
        bytes
    );
    let back = decode(&expected).expect("decodes");
    assert!(same(&back, m), "{back:?} != {m:?}");
}

// ---- the documented layout, byte for byte ----

#[test]
fn layout_call_any_with_every_value_type() {
    let m = Message::Call(Call {
        id: id(),
        caller: Eid::ipn(1, 0),
        mode: Mode::Any,
        server: None,
        procedure: "ls".into(),
        params: vec![
            Value::Bool(true),
            Value::Int(-2),
            Value::Float(1.5),
            Value::Text("x".into()),
            Value::Bytes(Bytes::from_static(&[0xff])),
            Value::File(FileRef {
                hash: [0xaa; 32],
                size: 5,
                name: "f".into(),
            }),
        ],
        requirements: String::new(),
        deadline: DtnTime::from_millis(1000),
        transport: Transport::Dtn,
    });
    assert_layout(
        &m,
        &fields(&format!(
            "8b 01 01 {ID}
             82 02 82 01 00          # caller ipn:1.0
             01                      # mode any
             f6                      # server null
             62 6c73                 # \"ls\"
             86
               82 00 f5              # true
               82 01 21              # -2
               82 02 fb 3ff8000000000000   # 1.5
               82 03 61 78           # \"x\"
               82 04 41 ff           # h'ff'
               82 05 83 5820 {HASH} 05 61 66
             60                      # requirements \"\"
             19 03e8                 # deadline 1000
             03                      # transport dtn"
        )),
    );
}

/// Strips `# comments` from an expected encoding laid out one field a line.
fn fields(s: &str) -> String {
    s.lines()
        .map(|line| line.split('#').next().unwrap_or(""))
        .collect()
}

#[test]
fn layout_call_explicit() {
    let m = Message::Call(Call {
        id: id(),
        caller: eid("dtn://a/"),
        mode: Mode::Explicit,
        server: Some(eid("dtn://b/svc")),
        procedure: "up".into(),
        params: vec![],
        requirements: "gps".into(),
        deadline: DtnTime::from_millis(0),
        transport: Transport::Auto,
    });
    assert_layout(
        &m,
        &fields(&format!(
            "8b 01 01 {ID}
             82 01 64 2f2f612f          # caller [1, \"//a/\"]
             00                         # mode explicit
             82 01 67 2f2f622f737663    # server [1, \"//b/svc\"]
             62 7570                    # \"up\"
             80                         # no params
             63 677073                  # \"gps\"
             00                         # deadline 0
             00                         # transport auto"
        )),
    );
}

#[test]
fn layout_ack() {
    let m = Message::Ack(Ack {
        id: id(),
        server: Eid::ipn(7, 0),
    });
    assert_layout(&m, &format!("84 01 02 {ID} 82 02 82 07 00"));
}

#[test]
fn layout_result() {
    let m = Message::Result(CallResult {
        id: id(),
        server: Eid::ipn(7, 0),
        value: Bytes::from_static(b"ok\n"),
        files: vec![FileRef {
            hash: [0xaa; 32],
            size: 1024,
            name: "out.txt".into(),
        }],
        run_ms: 250,
    });
    assert_layout(
        &m,
        &fields(&format!(
            "87 01 03 {ID}
             82 02 82 07 00                 # server ipn:7.0
             43 6f6b0a                      # value \"ok\\n\"
             81 83 5820 {HASH} 19 0400 67 6f75742e747874   # [[hash, 1024, \"out.txt\"]]
             18 fa                          # run 250 ms"
        )),
    );
}

#[test]
fn layout_reject_execution_failed() {
    let m = Message::Reject(Reject {
        id: id(),
        server: eid("dtn://s/"),
        code: RejectCode::ExecutionFailed,
        detail: "exit 2".into(),
        exit_status: Some(2),
        stderr_tail: Bytes::from_static(b"boom"),
    });
    assert_layout(
        &m,
        &fields(&format!(
            "88 01 04 {ID}
             82 01 64 2f2f732f      # server dtn://s/
             05                     # execution failed
             66 657869742032        # \"exit 2\"
             02                     # exit status 2
             44 626f6f6d            # stderr \"boom\""
        )),
    );
}

#[test]
fn layout_reject_other_code_negative_and_null_exit_status() {
    let other = Message::Reject(Reject {
        id: id(),
        server: Eid::Null,
        code: RejectCode::Other(300),
        detail: String::new(),
        exit_status: None,
        stderr_tail: Bytes::new(),
    });
    assert_layout(
        &other,
        &format!("88 01 04 {ID} 82 01 00  19 012c  60  f6  40"),
    );
    let negative = Message::Reject(Reject {
        id: id(),
        server: Eid::Null,
        code: RejectCode::Internal,
        detail: String::new(),
        exit_status: Some(i64::MIN),
        stderr_tail: Bytes::new(),
    });
    assert_layout(
        &negative,
        &format!("88 01 04 {ID} 82 01 00  0a  60  3b 7fffffffffffffff  40"),
    );
}

#[test]
fn layout_started_done_cancel() {
    let notice = Notice {
        id: id(),
        server: Eid::ipn(7, 0),
    };
    assert_layout(
        &Message::Started(notice.clone()),
        &format!("84 01 05 {ID} 82 02 82 07 00"),
    );
    assert_layout(
        &Message::Done(notice),
        &format!("84 01 06 {ID} 82 02 82 07 00"),
    );
    assert_layout(
        &Message::Cancel(Cancel {
            id: id(),
            caller: Eid::ipn(1, 0),
        }),
        &format!("84 01 07 {ID} 82 02 82 01 00"),
    );
    // A hello names no call.
    let hello = Message::Hello(Hello {
        node: Eid::ipn(9, 0),
    });
    assert_layout(&hello, "83 01 08 82 02 82 09 00");
    assert_eq!(hello.call_id(), None);
}

#[test]
fn layout_of_integer_and_float_values() {
    // (value, its encoding after the `82 01` / `82 02` of the value array)
    let cases = [
        (Value::Int(0), "82 01 00"),
        (Value::Int(23), "82 01 17"),
        (Value::Int(24), "82 01 18 18"),
        (Value::Int(-1), "82 01 20"),
        (Value::Int(-25), "82 01 38 18"),
        (Value::Int(i64::MAX), "82 01 1b 7fffffffffffffff"),
        (Value::Int(i64::MIN), "82 01 3b 7fffffffffffffff"),
        // A float that a shorter form could hold is still written in eight bytes.
        (Value::Float(0.0), "82 02 fb 0000000000000000"),
        (Value::Float(-0.0), "82 02 fb 8000000000000000"),
        (Value::Float(f64::INFINITY), "82 02 fb 7ff0000000000000"),
        (
            Value::Float(f64::from_bits(0x7ff8_0000_0000_0001)),
            "82 02 fb 7ff8000000000001",
        ),
        (Value::Bool(false), "82 00 f4"),
    ];
    for (value, expected) in cases {
        let m = Message::Call(Call {
            id: id(),
            caller: Eid::Null,
            mode: Mode::All,
            server: None,
            procedure: String::new(),
            params: vec![value],
            requirements: String::new(),
            deadline: DtnTime::from_millis(0),
            transport: Transport::Datagram,
        });
        assert_layout(
            &m,
            &format!("8b 01 01 {ID} 82 01 00 02 f6 60 81 {expected} 60 00 01"),
        );
    }
}

// ---- arbitrary messages ----

fn call_id() -> impl Strategy<Value = CallId> {
    any::<[u8; 16]>().prop_map(CallId)
}

fn endpoint() -> impl Strategy<Value = Eid> {
    prop_oneof![
        1 => Just(Eid::Null),
        4 => ("[a-zA-Z0-9][a-zA-Z0-9.~_-]{0,20}", "[!-~]{0,24}")
            .prop_map(|(node, demux)| Eid::dtn(&node, &demux).expect("generated from the grammar")),
        4 => (any::<u64>(), any::<u64>()).prop_map(|(n, s)| Eid::ipn(n, s)),
    ]
}

fn small_bytes() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from)
}

/// Any text, multi-byte characters included.
fn text() -> impl Strategy<Value = String> {
    ".{0,24}"
}

fn file_ref() -> impl Strategy<Value = FileRef> {
    (any::<[u8; 32]>(), any::<u64>(), text()).prop_map(|(hash, size, name)| FileRef {
        hash,
        size,
        name,
    })
}

fn int() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        -300i64..300,
        Just(i64::MIN),
        Just(i64::MAX),
        Just(-1 - i64::from(u32::MAX)),
    ]
}

/// Floats of every bit pattern: NaNs with any payload, infinities, subnormals, both zeros.
fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<u64>().prop_map(f64::from_bits),
        any::<f64>(),
        Just(f64::NAN),
        Just(-0.0),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        int().prop_map(Value::Int),
        float().prop_map(Value::Float),
        text().prop_map(Value::Text),
        small_bytes().prop_map(Value::Bytes),
        file_ref().prop_map(Value::File),
    ]
}

fn mode() -> impl Strategy<Value = Mode> {
    proptest::sample::select(Mode::ALL.to_vec())
}

fn transport() -> impl Strategy<Value = Transport> {
    proptest::sample::select(Transport::ALL.to_vec())
}

/// Reject codes in their canonical form (`Other` only for numbers the crate does not name).
fn reject_code() -> impl Strategy<Value = RejectCode> {
    prop_oneof![
        proptest::sample::select(RejectCode::KNOWN.to_vec()),
        any::<u64>().prop_map(RejectCode::from_number),
        (0u64..40).prop_map(RejectCode::from_number),
    ]
}

fn call() -> impl Strategy<Value = Call> {
    (
        call_id(),
        endpoint(),
        mode(),
        proptest::option::of(endpoint()),
        text(),
        proptest::collection::vec(value(), 0..8),
        text(),
        any::<u64>(),
        transport(),
    )
        .prop_map(
            |(id, caller, mode, server, procedure, params, requirements, deadline, transport)| {
                Call {
                    id,
                    caller,
                    mode,
                    server,
                    procedure,
                    params,
                    requirements,
                    deadline: DtnTime::from_millis(deadline),
                    transport,
                }
            },
        )
}

fn stderr_tail() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        4 => small_bytes(),
        1 => proptest::collection::vec(any::<u8>(), MAX_STDERR_TAIL..=MAX_STDERR_TAIL)
            .prop_map(Bytes::from),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    let notice = || (call_id(), endpoint()).prop_map(|(id, server)| Notice { id, server });
    prop_oneof![
        call().prop_map(Message::Call),
        (call_id(), endpoint()).prop_map(|(id, server)| Message::Ack(Ack { id, server })),
        (
            call_id(),
            endpoint(),
            small_bytes(),
            proptest::collection::vec(file_ref(), 0..4),
            any::<u64>()
        )
            .prop_map(
                |(id, server, value, files, run_ms)| Message::Result(CallResult {
                    id,
                    server,
                    value,
                    files,
                    run_ms
                })
            ),
        (
            call_id(),
            endpoint(),
            reject_code(),
            text(),
            proptest::option::of(int()),
            stderr_tail()
        )
            .prop_map(|(id, server, code, detail, exit_status, stderr_tail)| {
                Message::Reject(Reject {
                    id,
                    server,
                    code,
                    detail,
                    exit_status,
                    stderr_tail,
                })
            }),
        notice().prop_map(Message::Started),
        notice().prop_map(Message::Done),
        (call_id(), endpoint()).prop_map(|(id, caller)| Message::Cancel(Cancel { id, caller })),
        endpoint().prop_map(|node| Message::Hello(Hello { node })),
    ]
}

/// Encodes inside a property test: an encoding error fails the case.
fn enc(m: &Message) -> Result<Bytes, TestCaseError> {
    m.encode()
        .map(Bytes::from)
        .map_err(|e| TestCaseError::fail(format!("{m:?}: {e}")))
}

/// The pointer of a non-empty `Bytes` field lies inside the buffer it was decoded from.
fn assert_within(input: &Bytes, field: &Bytes) -> Result<(), TestCaseError> {
    if !field.is_empty() {
        prop_assert!(input.as_ptr_range().contains(&field.as_ptr()));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn messages_round_trip_and_re_encode_byte_for_byte(m in message()) {
        let bytes = enc(&m)?;
        let back = Message::decode(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(same(&back, &m), "{:?} != {:?}", back, m);
        prop_assert_eq!(back.call_id(), m.call_id());
        prop_assert_eq!(back.kind_name(), m.kind_name());
        prop_assert_eq!(&enc(&back)?, &bytes);
        if let Message::Call(call) = &m {
            // The borrowed encoding (what the engine's records use) is the same bytes.
            let borrowed = Message::encode_call(call).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&borrowed[..], &bytes[..]);
        }
    }

    #[test]
    fn every_prefix_is_an_error(m in message()) {
        let bytes = enc(&m)?;
        for cut in 0..bytes.len() {
            let prefix = bytes.slice(..cut);
            prop_assert!(Message::decode(&prefix).is_err(), "prefix of {} bytes decoded", cut);
        }
    }

    #[test]
    fn mutations_never_panic_and_what_decodes_is_canonical(
        m in message(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = enc(&m)?.to_vec();
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        // What decodes must be the encoding of what it decoded to: one encoding per message.
        if let Ok(d) = Message::decode(&Bytes::from(bytes.clone())) {
            prop_assert_eq!(enc(&d)?.to_vec(), bytes);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(d) = Message::decode(&Bytes::from(bytes.clone())) {
            prop_assert_eq!(enc(&d)?.to_vec(), bytes);
        }
    }

    #[test]
    fn bytes_fields_are_slices_of_the_input(m in message()) {
        let input = enc(&m)?;
        match Message::decode(&input).map_err(|e| TestCaseError::fail(e.to_string()))? {
            Message::Call(c) => {
                for p in &c.params {
                    if let Value::Bytes(b) = p {
                        assert_within(&input, b)?;
                    }
                }
            }
            Message::Result(r) => assert_within(&input, &r.value)?,
            Message::Reject(r) => assert_within(&input, &r.stderr_tail)?,
            _ => {}
        }
    }
}

#[test]
fn bytes_fields_are_slices_of_the_input_in_every_place() {
    // The property above checks what the generator happens to produce; this checks each place.
    let messages = [
        Message::Call(Call {
            id: id(),
            caller: Eid::Null,
            mode: Mode::Any,
            server: None,
            procedure: "p".into(),
            params: vec![Value::Bytes(Bytes::from_static(b"param"))],
            requirements: String::new(),
            deadline: DtnTime::from_millis(0),
            transport: Transport::Auto,
        }),
        Message::Result(CallResult {
            id: id(),
            server: Eid::Null,
            value: Bytes::from_static(b"stdout"),
            files: vec![],
            run_ms: 0,
        }),
        Message::Reject(Reject {
            id: id(),
            server: Eid::Null,
            code: RejectCode::ExecutionFailed,
            detail: String::new(),
            exit_status: Some(1),
            stderr_tail: Bytes::from_static(b"stderr"),
        }),
    ];
    for m in messages {
        let input = Bytes::from(m.encode().unwrap());
        let within = input.as_ptr_range();
        let field = match Message::decode(&input).unwrap() {
            Message::Call(c) => match &c.params[0] {
                Value::Bytes(b) => b.clone(),
                other => panic!("{other:?}"),
            },
            Message::Result(r) => r.value,
            Message::Reject(r) => r.stderr_tail,
            other => panic!("{other:?}"),
        };
        assert!(!field.is_empty());
        assert!(within.contains(&field.as_ptr()), "{} copied", m.kind_name());
    }
}

// ---- size limits ----

/// An any-mode call to `p` whose only parameter is a text of `n` bytes.
fn call_with_text(n: usize) -> Message {
    Message::Call(Call {
        id: id(),
        caller: Eid::ipn(1, 0),
        mode: Mode::Any,
        server: None,
        procedure: "p".into(),
        params: vec![Value::Text("x".repeat(n))],
        requirements: String::new(),
        deadline: DtnTime::from_millis(1),
        transport: Transport::Auto,
    })
}

#[test]
fn a_call_with_a_9000_byte_text_is_refused() {
    // With an empty text the value is 3 bytes (82 03 60); with 9000 it is 5 + 9000
    // (82 03 79 2328 …).
    let base = call_with_text(0).encode().unwrap().len();
    assert_eq!(
        call_with_text(9000).encode(),
        Err(EncodeError::TooLarge {
            len: base - 3 + 9005,
            max: MAX_CONTROL_LEN
        })
    );
}

#[test]
fn a_call_of_exactly_the_limit_fits_and_one_byte_more_does_not() {
    let base = call_with_text(0).encode().unwrap().len();
    // A text of n ≥ 256 bytes has a 3-byte head: the value is 2 + 3 + n bytes.
    let n = MAX_CONTROL_LEN - (base - 3) - 5;
    let fits = call_with_text(n);
    let bytes = fits.encode().unwrap();
    assert_eq!(bytes.len(), MAX_CONTROL_LEN);
    assert_eq!(decode(&bytes).unwrap(), fits);
    assert_eq!(
        call_with_text(n + 1).encode(),
        Err(EncodeError::TooLarge {
            len: MAX_CONTROL_LEN + 1,
            max: MAX_CONTROL_LEN
        })
    );
}

#[test]
fn a_large_result_is_refused_without_being_copied_first() {
    // 1 MiB of stdout: refused by its computed length (the error says how long it would be).
    let m = Message::Result(CallResult {
        id: id(),
        server: Eid::Null,
        value: Bytes::from(vec![0u8; 1 << 20]),
        files: vec![],
        run_ms: 0,
    });
    // 3 (array, version, kind) + 17 (id) + 3 (dtn:none) + 5 + 2^20 (value) + 1 (files) + 1 (run).
    assert_eq!(
        m.encode(),
        Err(EncodeError::TooLarge {
            len: 3 + 17 + 3 + 5 + (1 << 20) + 1 + 1,
            max: MAX_CONTROL_LEN
        })
    );
}

fn reject_with_tail(n: usize) -> Message {
    Message::Reject(Reject {
        id: id(),
        server: Eid::Null,
        code: RejectCode::ExecutionFailed,
        detail: "exit 1".into(),
        exit_status: Some(1),
        stderr_tail: Bytes::from(vec![b'e'; n]),
    })
}

#[test]
fn a_stderr_tail_over_its_limit_is_refused_both_ways() {
    let fits = reject_with_tail(MAX_STDERR_TAIL).encode().unwrap();
    assert!(decode(&fits).is_ok());
    assert_eq!(
        reject_with_tail(MAX_STDERR_TAIL + 1).encode(),
        Err(EncodeError::StderrTailTooLarge {
            len: MAX_STDERR_TAIL + 1,
            max: MAX_STDERR_TAIL
        })
    );
    // By hand: the tail's head 59 0800 becomes 59 0801, and one more byte follows.
    let head_at = fits.len() - MAX_STDERR_TAIL - 3;
    assert_eq!(fits[head_at..head_at + 3], [0x59, 0x08, 0x00]);
    let mut over = fits.clone();
    over[head_at + 2] = 0x01;
    over.push(b'e');
    let err = decode_err(&over);
    assert_eq!(err.offset, head_at);
    assert!(matches!(err.kind, K::InvalidControl(_)), "{err}");
}

#[test]
fn input_over_the_limit_is_refused() {
    let base = call_with_text(0).encode().unwrap().len();
    let mut bytes = call_with_text(MAX_CONTROL_LEN - (base - 3) - 5)
        .encode()
        .unwrap();
    bytes.push(0);
    let err = decode_err(&bytes);
    assert_eq!(err.offset, MAX_CONTROL_LEN);
    assert!(matches!(err.kind, K::InvalidControl(_)), "{err}");
}

// ---- malformed input ----

/// `ack` for `id()` from ipn:7.0.
fn ack_bytes() -> Vec<u8> {
    hex(&format!("84 01 02 {ID} 82 02 82 07 00"))
}

#[test]
fn wrong_versions_are_refused() {
    for version in [0x00, 0x02, 0x18] {
        let mut bytes = ack_bytes();
        bytes[1] = version;
        if version == 0x18 {
            // 24 needs a second byte.
            bytes.insert(2, 24);
        }
        let err = decode_err(&bytes);
        assert_eq!(err.offset, 1);
        assert!(matches!(err.kind, K::InvalidControl(_)), "{err}");
    }
    // A version that is not an unsigned integer.
    let mut bytes = ack_bytes();
    bytes[1] = 0x20;
    assert!(matches!(decode_err(&bytes).kind, K::UnexpectedType { .. }));
}

#[test]
fn unknown_kinds_are_refused() {
    for kind in [0x00, 0x09, 0x17] {
        let mut bytes = ack_bytes();
        bytes[2] = kind;
        let err = decode_err(&bytes);
        assert_eq!(err.offset, 2);
        assert!(matches!(err.kind, K::InvalidControl(_)), "{err}");
    }
}

#[test]
fn wrong_array_lengths_are_refused() {
    // The message array: one field short, one too many, and too short to hold version and kind.
    let mut short = ack_bytes();
    short[0] = 0x83;
    short.truncate(short.len() - 5);
    assert_eq!(
        decode_err(&short).kind,
        K::BadArrayLength {
            what: "ack",
            len: 3
        }
    );
    let mut long = ack_bytes();
    long[0] = 0x85;
    long.push(0x00);
    let err = decode_err(&long);
    assert_eq!(
        (err.offset, err.kind),
        (
            0,
            K::BadArrayLength {
                what: "ack",
                len: 5
            }
        )
    );
    for bytes in [&[0x80][..], &[0x81, 0x01]] {
        assert!(matches!(
            decode_err(bytes).kind,
            K::BadArrayLength { len: 0 | 1, .. }
        ));
    }
    // The other kinds, each with the ack's four items.
    for (kind, what) in [(1, "call"), (3, "result"), (4, "reject")] {
        let mut bytes = ack_bytes();
        bytes[2] = kind;
        assert_eq!(decode_err(&bytes).kind, K::BadArrayLength { what, len: 4 });
    }
    // A value of three items, and a file of two.
    let call = |value: &str| {
        hex(&format!(
            "8b 01 01 {ID} 82 01 00 01 f6 60 81 {value} 60 00 00"
        ))
    };
    assert!(decode(&call("82 00 f5")).is_ok());
    assert_eq!(
        decode_err(&call("83 00 f5 f5")).kind,
        K::BadArrayLength {
            what: "value",
            len: 3
        }
    );
    assert_eq!(
        decode_err(&call(&format!("82 05 82 5820 {HASH} 00"))).kind,
        K::BadArrayLength {
            what: "file",
            len: 2
        }
    );
}

#[test]
fn trailing_bytes_are_refused() {
    let mut bytes = ack_bytes();
    let end = bytes.len();
    bytes.push(0x00);
    let err = decode_err(&bytes);
    assert_eq!((err.offset, err.kind), (end, K::TrailingBytes));
}

#[test]
fn call_ids_must_be_16_bytes() {
    for (len, head) in [(0, "40"), (15, "4f"), (17, "51"), (32, "5820")] {
        let body = "ab".repeat(len);
        let err = decode_err(&hex(&format!("84 01 02 {head} {body} 82 02 82 07 00")));
        assert_eq!(err.offset, 3);
        assert!(matches!(err.kind, K::InvalidControl(_)), "{err}");
    }
    // Not a byte string at all.
    let err = decode_err(&hex(
        "84 01 02 70 000102030405060708090a0b0c0d0e0f 82 02 82 07 00",
    ));
    assert!(matches!(err.kind, K::UnexpectedType { .. }), "{err}");
}

#[test]
fn file_hashes_must_be_32_bytes() {
    let result = |h: &str| hex(&format!("87 01 03 {ID} 82 01 00 40 81 83 {h} 00 60 00"));
    assert!(decode(&result(&format!("5820 {}", "11".repeat(32)))).is_ok());
    for hash in [
        format!("581f {}", "11".repeat(31)),
        format!("5821 {}", "11".repeat(33)),
        "40".to_string(),
    ] {
        let err = decode_err(&result(&hash));
        assert!(matches!(err.kind, K::InvalidControl(_)), "{err}");
    }
}

#[test]
fn text_must_be_utf8() {
    let call = |procedure: &str| {
        hex(&format!(
            "8b 01 01 {ID} 82 01 00 01 f6 {procedure} 80 60 00 00"
        ))
    };
    assert!(decode(&call("62 c3a4")).is_ok()); // "ä"
    for bad in ["61 ff", "62 c328", "61 c3"] {
        let err = decode_err(&call(bad));
        assert_eq!(err.offset, 25);
        assert!(matches!(err.kind, K::InvalidCbor(_)), "{err}");
    }
    // The same check in a text value, a file name, a reject's detail and the requirements.
    let mut bytes = Message::Reject(Reject {
        id: id(),
        server: Eid::Null,
        code: RejectCode::Internal,
        detail: "ä".into(),
        exit_status: None,
        stderr_tail: Bytes::new(),
    })
    .encode()
    .unwrap();
    let at = bytes.iter().position(|&b| b == 0xc3).unwrap();
    bytes[at] = 0xff;
    assert!(matches!(decode_err(&bytes).kind, K::InvalidCbor(_)));
    for value in [
        "82 03 61 80".to_string(),
        format!("82 05 83 5820 {HASH} 00 61 fe"),
    ] {
        let bytes = hex(&format!(
            "8b 01 01 {ID} 82 01 00 01 f6 60 81 {value} 60 00 00"
        ));
        assert!(matches!(decode_err(&bytes).kind, K::InvalidCbor(_)));
    }
    let bytes = hex(&format!("8b 01 01 {ID} 82 01 00 01 f6 60 80 61 ff 00 00"));
    assert!(matches!(decode_err(&bytes).kind, K::InvalidCbor(_)));
}

#[test]
fn unknown_value_tags_modes_and_transports_are_refused() {
    let call = |mode: &str, value: &str, transport: &str| {
        hex(&format!(
            "8b 01 01 {ID} 82 01 00 {mode} f6 60 81 {value} 60 00 {transport}"
        ))
    };
    assert!(decode(&call("02", "82 00 f5", "03")).is_ok());
    let cases = [
        (call("03", "82 00 f5", "03"), 23),    // mode 3
        (call("02", "82 06 f5", "03"), 28),    // value tag 6
        (call("02", "82 18 18 f5", "03"), 28), // value tag 24
        (call("02", "82 00 f5", "04"), 32),    // transport 4
        (call("02", "82 00 f5", "18 ff"), 32), // transport 255
    ];
    for (bytes, offset) in cases {
        let err = decode_err(&bytes);
        assert_eq!(err.offset, offset, "{err}");
        assert!(matches!(err.kind, K::InvalidControl(_)), "{err}");
    }
}

#[test]
fn values_of_the_wrong_type_are_refused() {
    let call = |value: &str| {
        hex(&format!(
            "8b 01 01 {ID} 82 01 00 01 f6 60 81 {value} 60 00 00"
        ))
    };
    for (value, expected) in [
        ("82 00 01", "boolean"),                  // bool tag, an integer
        ("82 00 f6", "boolean"),                  // bool tag, null
        ("82 01 f5", "integer"),                  // int tag, a bool
        ("82 01 fb 3ff8000000000000", "integer"), // int tag, a float
        ("82 02 01", "float64"),                  // float tag, an integer
        ("82 02 f6", "float64"),                  // float tag, null
        ("82 03 41 78", "text string"),           // text tag, bytes
        ("82 04 61 78", "byte string"),           // bytes tag, text
        ("82 05 41 78", "array"),                 // file tag, bytes
    ] {
        let err = decode_err(&call(value));
        assert_eq!(
            (err.offset, err.kind),
            (29, K::UnexpectedType { expected }),
            "{value}"
        );
    }
    // Null is not an endpoint id where the layout has no null (an ack's server, a call's caller),
    // nor an integer where it does not say so (a result's run time).
    assert!(decode(&hex(&format!("84 01 02 {ID} f6"))).is_err());
    assert!(decode(&hex(&format!("8b 01 01 {ID} f6 01 f6 60 80 60 00 00"))).is_err());
    assert!(decode(&hex(&format!("87 01 03 {ID} 82 01 00 40 80 f6"))).is_err());
}

#[test]
fn integers_outside_64_signed_bits_are_refused() {
    let call = |value: &str| {
        hex(&format!(
            "8b 01 01 {ID} 82 01 00 01 f6 60 81 {value} 60 00 00"
        ))
    };
    assert!(decode(&call("82 01 1b 7fffffffffffffff")).is_ok());
    assert!(decode(&call("82 01 3b 7fffffffffffffff")).is_ok());
    for value in [
        "82 01 1b 8000000000000000",
        "82 01 3b 8000000000000000",
        "82 01 3b ffffffffffffffff",
    ] {
        let err = decode_err(&call(value));
        assert_eq!(err.offset, 29, "{err}");
        assert!(matches!(err.kind, K::InvalidControl(_)), "{err}");
    }
    // The same for a reject's exit status.
    let reject = |status: &str| hex(&format!("88 01 04 {ID} 82 01 00 05 60 {status} 40"));
    assert!(decode(&reject("20")).is_ok());
    for status in ["1b 8000000000000000", "3b 8000000000000000"] {
        let err = decode_err(&reject(status));
        assert_eq!(err.offset, 25, "{err}");
        assert!(matches!(err.kind, K::InvalidControl(_)), "{err}");
    }
}

#[test]
fn non_canonical_encodings_are_refused() {
    let good = format!("8b 01 01 {ID} 82 02 82 01 00 01 f6 60 81 82 01 05 60 00 00");
    assert!(decode(&hex(&good)).is_ok());
    const INDEFINITE_ARRAY: K =
        K::InvalidCbor("indefinite-length array where a definite one is required");
    const INDEFINITE_EID: K = K::InvalidCbor("indefinite-length array in an endpoint id");
    const NOT_FLOAT64: K = K::UnexpectedType {
        expected: "float64",
    };
    let cases = [
        // An indefinite-length message array.
        (
            format!("9f 01 01 {ID} 82 02 82 01 00 01 f6 60 81 82 01 05 60 00 00 ff"),
            0,
            INDEFINITE_ARRAY,
        ),
        // An indefinite-length parameter list, and value array (the caller is ipn:1.0, 5 bytes).
        (
            format!("8b 01 01 {ID} 82 02 82 01 00 01 f6 60 9f 82 01 05 ff 60 00 00"),
            28,
            INDEFINITE_ARRAY,
        ),
        (
            format!("8b 01 01 {ID} 82 02 82 01 00 01 f6 60 81 9f 01 05 ff 60 00 00"),
            29,
            INDEFINITE_ARRAY,
        ),
        // Indefinite-length arrays inside the caller's endpoint id (which bundles accept).
        (
            format!("8b 01 01 {ID} 9f 02 82 01 00 ff 01 f6 60 81 82 01 05 60 00 00"),
            20,
            INDEFINITE_EID,
        ),
        (
            format!("8b 01 01 {ID} 82 02 9f 01 00 ff 01 f6 60 81 82 01 05 60 00 00"),
            20,
            INDEFINITE_EID,
        ),
        // An integer value not in its shortest form (5 as 18 05), and a deadline (0 as 18 00).
        (
            format!("8b 01 01 {ID} 82 02 82 01 00 01 f6 60 81 82 01 18 05 60 00 00"),
            31,
            K::NotDeterministic,
        ),
        (
            format!("8b 01 01 {ID} 82 02 82 01 00 01 f6 60 81 82 01 05 60 18 00 00"),
            33,
            K::NotDeterministic,
        ),
        // The version in two bytes.
        (
            format!("8b 18 01 01 {ID} 82 02 82 01 00 01 f6 60 81 82 01 05 60 00 00"),
            1,
            K::NotDeterministic,
        ),
        // An indefinite-length text for the procedure.
        (
            format!("8b 01 01 {ID} 82 02 82 01 00 01 f6 7f ff 81 82 01 05 60 00 00"),
            27,
            K::InvalidCbor("indefinite-length string where a definite one is required"),
        ),
        // A float in the 2- and 4-byte forms (1.5).
        (
            format!("8b 01 01 {ID} 82 02 82 01 00 01 f6 60 81 82 02 f9 3e00 60 00 00"),
            31,
            NOT_FLOAT64,
        ),
        (
            format!("8b 01 01 {ID} 82 02 82 01 00 01 f6 60 81 82 02 fa 3fc00000 60 00 00"),
            31,
            NOT_FLOAT64,
        ),
    ];
    for (case, offset, kind) in cases {
        let err = decode_err(&hex(&case));
        assert_eq!((err.offset, err.kind), (offset, kind), "{case}");
    }
}

#[test]
fn hostile_counts_are_refused_without_allocating() {
    // A parameter list that claims 2^32 values in a few bytes.
    let bytes = hex(&format!(
        "8b 01 01 {ID} 82 01 00 01 f6 60 9b 0000000100000000 60 00 00"
    ));
    assert!(matches!(
        decode_err(&bytes).kind,
        K::LengthExceedsInput { .. }
    ));
    // A result whose value claims 2^64-1 bytes.
    let bytes = hex(&format!("87 01 03 {ID} 82 01 00 5b ffffffffffffffff 80 00"));
    assert!(matches!(
        decode_err(&bytes).kind,
        K::LengthExceedsInput { .. }
    ));
    assert_eq!(decode_err(&[]).kind, K::Truncated);
}

// ---- reject codes ----

#[test]
fn reject_codes_have_stable_numbers_and_names() {
    let expected = [
        (RejectCode::NotOffered, 1, "not_offered"),
        (RejectCode::BadArguments, 2, "bad_arguments"),
        (RejectCode::PredicateFailed, 3, "predicate_failed"),
        (RejectCode::NotAllowed, 4, "not_allowed"),
        (RejectCode::ExecutionFailed, 5, "execution_failed"),
        (RejectCode::TimedOut, 6, "timed_out"),
        (RejectCode::OutputTooLarge, 7, "output_too_large"),
        (RejectCode::Expired, 8, "expired"),
        (RejectCode::Cancelled, 9, "cancelled"),
        (RejectCode::Internal, 10, "internal"),
        (RejectCode::ResultLost, 11, "result_lost"),
        (RejectCode::ServerStopped, 12, "server_stopped"),
    ];
    assert_eq!(RejectCode::KNOWN.len(), expected.len());
    for ((code, number, name), known) in expected.into_iter().zip(RejectCode::KNOWN) {
        assert_eq!(code, known);
        assert_eq!(code.number(), number);
        assert_eq!(RejectCode::from_number(number), code);
        assert_eq!(code.name(), name);
        assert_eq!(code.to_string(), name);
    }
    for n in [0, 13, 300, u64::MAX] {
        assert_eq!(RejectCode::from_number(n), RejectCode::Other(n));
        assert_eq!(RejectCode::Other(n).number(), n);
        assert_eq!(RejectCode::Other(n).name(), "other");
    }
    assert_eq!(RejectCode::Other(42).to_string(), "other(42)");
    // An `Other` with a named number is that code on the wire.
    assert_eq!(
        RejectCode::from_number(RejectCode::Other(3).number()),
        RejectCode::PredicateFailed
    );
}

#[test]
fn unknown_reject_codes_survive_the_wire() {
    for n in [0, 13, 255, u64::MAX] {
        let m = Message::Reject(Reject {
            id: id(),
            server: Eid::ipn(7, 0),
            code: RejectCode::Other(n),
            detail: "from a newer peer".into(),
            exit_status: None,
            stderr_tail: Bytes::new(),
        });
        assert_eq!(decode(&m.encode().unwrap()).unwrap(), m);
    }
}

// ---- text forms ----

#[test]
fn modes_and_transports_print_and_parse() {
    let modes = [
        (Mode::Explicit, 0, "explicit"),
        (Mode::Any, 1, "any"),
        (Mode::All, 2, "all"),
    ];
    assert_eq!(Mode::ALL.len(), modes.len());
    for (mode, number, name) in modes {
        assert_eq!(mode.number(), number);
        assert_eq!(Mode::from_number(number), Some(mode));
        assert_eq!(mode.name(), name);
        assert_eq!(mode.to_string(), name);
        assert_eq!(name.parse::<Mode>(), Ok(mode));
    }
    assert_eq!(Mode::from_number(3), None);
    for bad in ["", "Any", "first", " any", "explicit "] {
        assert!(bad.parse::<Mode>().is_err(), "{bad:?} parsed");
    }
    let err = "some".parse::<Mode>().unwrap_err();
    assert!(err.to_string().contains("some"), "{err}");

    let transports = [
        (Transport::Auto, 0, "auto"),
        (Transport::Datagram, 1, "datagram"),
        (Transport::Stream, 2, "stream"),
        (Transport::Dtn, 3, "dtn"),
    ];
    assert_eq!(Transport::ALL.len(), transports.len());
    for (transport, number, name) in transports {
        assert_eq!(transport.number(), number);
        assert_eq!(Transport::from_number(number), Some(transport));
        assert_eq!(transport.name(), name);
        assert_eq!(transport.to_string(), name);
        assert_eq!(name.parse::<Transport>(), Ok(transport));
    }
    assert_eq!(Transport::from_number(4), None);
    for bad in ["", "DTN", "tcp", "udp"] {
        assert!(bad.parse::<Transport>().is_err(), "{bad:?} parsed");
    }
}

#[test]
fn call_ids_print_and_parse() {
    let id = id();
    assert_eq!(id.to_string(), "000102030405060708090a0b0c0d0e0f");
    assert_eq!(
        format!("{id:?}"),
        "CallId(000102030405060708090a0b0c0d0e0f)"
    );
    assert_eq!("000102030405060708090a0b0c0d0e0f".parse::<CallId>(), Ok(id));
    let upper = CallId([0xab; 16]);
    assert_eq!(
        "ABABABABABABABABABABABABABABABAB".parse::<CallId>(),
        Ok(upper)
    );
    assert_eq!(
        " 000102030405060708090a0b0c0d0e0f\n".parse::<CallId>(),
        Ok(id)
    );
    for bad in [
        "",
        "000102030405060708090a0b0c0d0e",
        "000102030405060708090a0b0c0d0e0f00",
        "g00102030405060708090a0b0c0d0e0f",
        "+00102030405060708090a0b0c0d0e0f",
        // 32 bytes, 16 characters: refused, not sliced inside a character.
        "ääääääääääääääää",
    ] {
        assert!(bad.parse::<CallId>().is_err(), "{bad:?} parsed");
    }
}

proptest! {
    #[test]
    fn call_ids_round_trip_through_text(id in call_id()) {
        prop_assert_eq!(id.to_string().parse::<CallId>(), Ok(id));
    }
}

proptest! {
    #[test]
    fn call_ids_order_as_their_bytes(a in any::<[u8; 16]>(), b in any::<[u8; 16]>(), at in 0usize..16) {
        // Also ids equal up to a byte, where the order is decided late.
        let mut c = a;
        c[at] = b[at];
        for (x, y) in [(a, b), (a, c), (c, a), (a, a)] {
            prop_assert_eq!(CallId(x).cmp(&CallId(y)), x.cmp(&y));
        }
    }
}

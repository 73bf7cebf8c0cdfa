//! The four examples of RFC 9173 Appendix A, byte for byte: each published bundle parses,
//! verifies or decrypts with the published keys, and the published security blocks are made
//! again from the original bundle, keys and IV.

use bpsec::bcb::{self, EncryptSpec};
use bpsec::bib::{self, ShaVariant, SignSpec};
use bpsec::{AbstractSecurityBlock, Key, SCOPE_ALL};
use bytes::Bytes;
use wire::{BlockFlags, Bundle, Eid, ExtensionData};

fn h(s: &str) -> Vec<u8> {
    hex::decode(s.split_whitespace().collect::<String>()).unwrap()
}

/// RFC 9173's bundles have creation time 0 and no bundle age block, which RFC 9171 §4.3.1
/// forbids and `Bundle::decode` refuses: they are read without the cross-block rules.
fn bundle(s: &str) -> Bundle {
    Bundle::decode_structure(Bytes::from(h(s))).unwrap()
}

fn encode(b: &Bundle) -> Vec<u8> {
    b.encode().to_bytes().to_vec()
}

fn block_data(b: &Bundle, number: u64) -> Bytes {
    match &b
        .extensions
        .iter()
        .find(|x| x.number == number)
        .unwrap()
        .data
    {
        ExtensionData::Unknown { data, .. } => data.clone(),
        other => panic!("block {number} is {other:?}"),
    }
}

/// A.1.1.3 (and A.2.1.3, A.4.1.3): the original bundle, primary block and payload
/// "Ready to generate a 32-byte payload".
const ORIGINAL: &str = "9f88070000820282010282028202018202820201820018281a000f424085010100
    005823526561647920746f2067656e657261746520612033322d6279746520706179
    6c6f6164ff";

/// A.1.3.1: the HMAC key of examples 1, 3 and 4.
const HMAC_KEY: &str = "1a2b1a2b1a2b1a2b1a2b1a2b1a2b1a2b";

/// A.1.4: the bundle with its BIB (HMAC 512/512, no additional scope).
const A1_FINAL: &str = "9f88070000820282010282028202018202820201820018281a000f4240850b0200
    005856810101018202820201828201078203008181820158403bdc69b3a34a2b5d3a
    8554368bd1e808f606219d2a10a846eae3886ae4ecc83c4ee550fdfb1cc636b904e2
    f1a73e303dcd4b6ccece003e95e8164dcc89a156e185010100005823526561647920
    746f2067656e657261746520612033322d62797465207061796c6f6164ff";

/// A.1.3.2: the BIB's abstract security block.
const A1_ASB: &str = "810101018202820201828201078203008181820158403bdc69b3a34a2b5d3a8554
    368bd1e808f606219d2a10a846eae3886ae4ecc83c4ee550fdfb1cc636b904e2f1a7
    3e303dcd4b6ccece003e95e8164dcc89a156e1";

/// A.2.3.1: content-encryption key, key-encryption key, IV.
const A2_CEK: &str = "71776572747975696f70617364666768";
const A2_KEK: &str = "6162636465666768696a6b6c6d6e6f70";
const IV: &str = "5477656c7665313231323132";

/// A.2.4: the bundle with its BCB (A128GCM, wrapped key, no additional scope).
const A2_FINAL: &str = "9f88070000820282010282028202018202820201820018281a000f4240850c0201
    0058508101020182028202018482014c5477656c7665313231323132820201820358
    1869c411276fecddc4780df42c8a2af89296fabf34d7fae7008204008181820150ef
    a4b5ac0108e3816c5606479801bc04850101000058233a09c1e63fe23a7f66a59c73
    03837241e070b02619fc59c5214a22f08cd70795e73e9aff";

/// A.3.1.4: the original bundle of example 3, with a bundle age block.
const A3_ORIGINAL: &str = "9f88070000820282010282028202018202820201820018281a000f424085070200
    004319012c85010100005823526561647920746f2067656e65726174652061203332
    2d62797465207061796c6f6164ff";

/// A.3.5: a BIB by a waypoint (ipn:3.0) over the primary and bundle age blocks, a BCB by the
/// source over the payload.
const A3_FINAL: &str = "9f88070000820282010282028202018202820201820018281a000f4240850b0300
    00585c8200020101820282030082820105820300828182015820cac6ce8e4c5dae57
    988b757e49a6dd1431dc04763541b2845098265bc817241b81820158203ed614c0d9
    7f49b3633627779aa18a338d212bf3c92b97759d9739cd50725596850c0401005834
    8101020182028202018382014c5477656c7665313231323132820201820400818182
    0150efa4b5ac0108e3816c5606479801bc0485070200004319012c85010100005823
    3a09c1e63fe23a7f66a59c7303837241e070b02619fc59c5214a22f08cd70795e73e
    9aff";

/// A.4.4.1: the AES-256 key of example 4.
const A4_KEY: &str = "71776572747975696f7061736466676871776572747975696f70617364666768";

/// A.4.3.3: the BIB of example 4 (HMAC 384/384, all scope flags) before it is encrypted.
const A4_BIB_BLOCK: &str = "850b030000584681010101820282020182820106820307818182015830f75fe4c3
    7f76f046165855bd5ff72fbfd4e3a64b4695c40e2b787da005ae819f0a2e30a2e8b3
    25527de8aefb52e73d71";

/// A.4.5: the payload and the BIB encrypted by one BCB (A256GCM, all scope flags).
const A4_FINAL: &str = "9f88070000820282010282028202018202820201820018281a000f4240850b0300
    005846438ed6208eb1c1ffb94d952175167df0902902064a2983910c4fb2340790bf
    420a7d1921d5bf7c4721e02ab87a93ab1e0b75cf62e4948727c8b5dae46ed2af0543
    9b88029191850c0201005849820301020182028202018382014c5477656c76653132
    313231328202038204078281820150220ffc45c8a901999ecc60991dd78b29818201
    50d2c51cb2481792dae8b21d848cede99b8501010000582390eab6457593379298a8
    724e16e61f837488e127212b59ac91f8a86287b7d07630a122ff";

fn ipn(node: u64, service: u64) -> Eid {
    Eid::ipn(node, service)
}

fn iv() -> [u8; 12] {
    h(IV).try_into().unwrap()
}

#[test]
fn a1_simple_integrity() {
    let key = Key::new(&h(HMAC_KEY));
    // Parse and verify the published bundle.
    let published = bundle(A1_FINAL);
    assert_eq!(
        encode(&published),
        h(A1_FINAL),
        "decodes and encodes to itself"
    );
    let asb = AbstractSecurityBlock::decode(&block_data(&published, 2)).unwrap();
    assert_eq!(asb.targets, vec![1]);
    assert_eq!(asb.context_id, bib::CONTEXT_ID);
    assert_eq!(asb.source, ipn(2, 1));
    assert_eq!(asb.encode(), h(A1_ASB));
    let v = bib::verify(&published, 2, &key).unwrap();
    assert_eq!(v.targets, vec![1]);
    assert_eq!(v.source, ipn(2, 1));

    // Make it again from the original bundle.
    let mut b = bundle(ORIGINAL);
    let source = ipn(2, 1);
    let block = bib::sign(
        &mut b,
        &[1],
        &SignSpec {
            block_number: 2,
            flags: BlockFlags::default(),
            source: &source,
            sha: ShaVariant::Sha512,
            scope: 0,
            key: &key,
            wrap_under: None,
        },
    )
    .unwrap();
    b.extensions.insert(0, block);
    assert_eq!(encode(&b), h(A1_FINAL));
}

#[test]
fn a2_simple_confidentiality_with_key_wrap() {
    let cek = Key::new(&h(A2_CEK));
    let kek = Key::new(&h(A2_KEK));
    let mut published = bundle(A2_FINAL);
    assert_eq!(encode(&published), h(A2_FINAL));
    let asb = AbstractSecurityBlock::decode(&block_data(&published, 2)).unwrap();
    assert_eq!(asb.context_id, bcb::CONTEXT_ID);
    assert_eq!(
        bpsec::unwrap_key(
            &kek,
            &h("69c411276fecddc4780df42c8a2af89296fabf34d7fae700"),
            2
        )
        .unwrap(),
        cek,
        "A.2.3.1: the wrapped key unwraps to the content-encryption key"
    );
    // The acceptor holds the key-encryption key only.
    let d = bcb::decrypt(&mut published, 2, &kek).unwrap();
    assert_eq!(d.targets, vec![1]);
    assert_eq!(
        encode(&published),
        h(ORIGINAL),
        "decrypted and the BCB removed"
    );

    let mut b = bundle(ORIGINAL);
    let source = ipn(2, 1);
    let block = bcb::encrypt(
        &mut b,
        &[1],
        &EncryptSpec {
            block_number: 2,
            flags: BlockFlags::default(),
            source: &source,
            iv: iv(),
            scope: 0,
            key: &cek,
            wrap_under: Some(&kek),
        },
    )
    .unwrap();
    b.extensions.insert(0, block);
    assert_eq!(encode(&b), h(A2_FINAL));
}

#[test]
fn a3_security_blocks_from_multiple_sources() {
    let hmac_key = Key::new(&h(HMAC_KEY));
    let aes_key = Key::new(&h(A2_CEK));
    let mut published = bundle(A3_FINAL);
    assert_eq!(encode(&published), h(A3_FINAL));
    // The waypoint's BIB covers the primary block (target 0) and the bundle age block.
    let v = bib::verify(&published, 3, &hmac_key).unwrap();
    assert_eq!((v.targets, v.source), (vec![0, 2], ipn(3, 0)));
    bcb::decrypt(&mut published, 4, &aes_key).unwrap();
    assert_eq!(
        &published.payload.data[..],
        b"Ready to generate a 32-byte payload"
    );
    // With the BCB gone, the BIB still verifies (it covers neither the payload nor the BCB).
    bib::verify(&published, 3, &hmac_key).unwrap();

    // Made again: the source encrypts, then the waypoint signs.
    let mut b = bundle(A3_ORIGINAL);
    let src = ipn(2, 1);
    let bcb_block = bcb::encrypt(
        &mut b,
        &[1],
        &EncryptSpec {
            block_number: 4,
            flags: BlockFlags::default(),
            source: &src,
            iv: iv(),
            scope: 0,
            key: &aes_key,
            wrap_under: None,
        },
    )
    .unwrap();
    b.extensions.insert(0, bcb_block);
    let waypoint = ipn(3, 0);
    let bib_block = bib::sign(
        &mut b,
        &[0, 2],
        &SignSpec {
            block_number: 3,
            flags: BlockFlags::default(),
            source: &waypoint,
            sha: ShaVariant::Sha256,
            scope: 0,
            key: &hmac_key,
            wrap_under: None,
        },
    )
    .unwrap();
    b.extensions.insert(0, bib_block);
    assert_eq!(encode(&b), h(A3_FINAL));
}

#[test]
fn a4_security_blocks_with_full_scope() {
    let hmac_key = Key::new(&h(HMAC_KEY));
    let aes_key = Key::new(&h(A4_KEY));
    let mut published = bundle(A4_FINAL);
    assert_eq!(encode(&published), h(A4_FINAL));
    // The BIB is ciphertext until the BCB is decrypted.
    assert!(bib::verify(&published, 3, &hmac_key).is_err());
    let d = bcb::decrypt(&mut published, 2, &aes_key).unwrap();
    assert_eq!(d.targets, vec![3, 1]);
    let bib_block = published.extensions.iter().find(|x| x.number == 3).unwrap();
    let mut one = Bundle::new(published.primary.clone(), Bytes::new());
    one.extensions.push(bib_block.clone());
    let enc = encode(&one);
    let want = h(A4_BIB_BLOCK);
    assert!(
        enc.windows(want.len()).any(|w| w == want),
        "A.4.3.3's BIB, decrypted"
    );
    let v = bib::verify(&published, 3, &hmac_key).unwrap();
    assert_eq!(v.targets, vec![1]);
    assert_eq!(encode(&published), {
        // The original bundle with the plaintext BIB (A.4.3.3) before its payload.
        let mut b = bundle(ORIGINAL);
        b.extensions.insert(0, bib_block.clone());
        encode(&b)
    });

    // Made again: sign with every scope flag, then encrypt payload and BIB.
    let mut b = bundle(ORIGINAL);
    let src = ipn(2, 1);
    let bib_block = bib::sign(
        &mut b,
        &[1],
        &SignSpec {
            block_number: 3,
            flags: BlockFlags::default(),
            source: &src,
            sha: ShaVariant::Sha384,
            scope: SCOPE_ALL,
            key: &hmac_key,
            wrap_under: None,
        },
    )
    .unwrap();
    b.extensions.insert(0, bib_block);
    let bcb_block = bcb::encrypt(
        &mut b,
        &[3, 1],
        &EncryptSpec {
            block_number: 2,
            flags: BlockFlags::default(),
            source: &src,
            iv: iv(),
            scope: SCOPE_ALL,
            key: &aes_key,
            wrap_under: None,
        },
    )
    .unwrap();
    b.extensions.insert(1, bcb_block);
    assert_eq!(encode(&b), h(A4_FINAL));
}

//! Ferry's wire formats: BPv7 bundles (RFC 9171) and TCPCLv4 messages (RFC 9174).
//!
//! ```text
//!   received bytes (Bytes) ──► Bundle::decode ──► Bundle { primary, extensions, payload: Bytes }
//!                                                   │          (payload = slice of the input)
//!   Bundle::encode ──► EncodedBundle [ header blocks │ payload (by reference) │ CRC + break ]
//!                                      └──────────── one write_vectored ─────────────┘
//! ```
//!
//! This crate only turns bytes into values and values into bytes. It never performs I/O, never
//! reads a clock or a random source, and never copies a payload: decoding slices the received
//! `Bytes`, encoding returns the payload by reference beside a small header buffer.
//!
//! Decoding is strict where RFC 9171 is strict (deterministic CBOR, array lengths, CRCs over the
//! received bytes, the rules that span blocks) and liberal where it says to ignore (reserved and
//! unknown flag bits are kept and ignored; blocks of unknown types are kept byte for byte and can
//! be handled per their processing flags with [`Bundle::apply_unsupported_block_rules`]).
//! A primary block without a CRC is accepted: RFC 9171 allows it when a BPSec integrity block
//! covers the primary block, which this crate cannot verify; policy on it belongs to the node.
//! Malformed input of any kind yields a [`DecodeError`] naming the byte offset; nothing panics and
//! nothing is allocated by a length that was not first checked against the input.
//!
//! Modules: [`Bundle`] and its blocks, [`Eid`], [`CrcType`], [`AdminRecord`] (status reports),
//! [`Beacon`] (neighbour discovery; [`ipnd`] for dtn7-rs's beacons), [`Control`] (Ferry's mesh-routing, summary-vector and stream
//! messages), fragmentation ([`Bundle::split_at`], [`Bundle::fragment`]) and
//! [`Reassembly`], and [`tcpcl`] (the TCP convergence layer's messages, with
//! incremental parsing).

#![forbid(unsafe_code)]

mod admin;
mod beacon;
mod block;
mod bundle;
mod cbor;
mod control;
mod crc;
mod eid;
mod error;
mod fragment;
mod hex;
pub mod ipnd;
mod primary;
pub mod rpc;
pub mod tcpcl;
pub mod time;

pub use admin::{AdminRecord, RECORD_STATUS_REPORT, StatusAssertion, StatusReason, StatusReport};
pub use beacon::{BEACON_VERSION, Beacon, Capabilities, ClaEndpoint, ClaKind};
pub use block::{
    BLOCK_BUNDLE_AGE, BLOCK_HOP_COUNT, BLOCK_PAYLOAD, BLOCK_PREVIOUS_NODE, BlockFlags,
    ExtensionBlock, ExtensionData, HopCount, PAYLOAD_BLOCK_NUMBER,
};
pub use bundle::{Bundle, EncodedBundle, PayloadBlock, UnsupportedBlocks};
pub use control::{
    BLOCK_FERRY_CLASS, BLOCK_FERRY_COPIES, CONTROL_VERSION, Control, LinkState, ListRoom,
    StreamAck, StreamSegment, Summary, bundle_key, parse_uint_block_data, uint_block_data,
};
pub use crc::CrcType;
pub use eid::{DtnEid, Eid, ParseEidError, SCHEME_DTN, SCHEME_IPN};
pub use error::{DecodeError, DecodeErrorKind};
pub use fragment::{FragmentError, Reassembly, ReassemblyError, decode_cut_transfer, peek_primary};
pub use hex::{fmt_hex, hex};
pub use primary::{
    BP_VERSION, BundleFlags, BundleId, CreationTimestamp, DTN_EPOCH_UNIX_SECS, DtnTime,
    FragmentInfo, PrimaryBlock,
};

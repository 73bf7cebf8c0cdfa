//! The JSON of the keys this node knows for other nodes (`GET /v1/keys`, `PUT` and `DELETE
//! /v1/keys/{node}`, `ferry keys`): the engine's [`rpc::KnownKey`]s as text, and the operator's
//! changes ([`rpc::Rpc::accept_key`], [`rpc::Rpc::forget_key`]) with their errors as stable API
//! codes.

use serde::{Deserialize, Serialize};
use wire::DtnTime;

use crate::calls::parse_node;
use crate::control::ApiError;

/// A node whose key this node knows (`GET /v1/keys`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct KeyInfo {
    /// The node id.
    pub node: String,
    /// Its Ed25519 public key, 64 hex digits: messages naming the node must be signed by it.
    pub key: String,
    /// How it came to be known: `configured`, `hello`, `call`, `reply` (learnt from the first
    /// such message), `accepted` (by the operator) or `learnt` (by an earlier version).
    pub source: String,
    /// When it was learnt or accepted, ms since the DTN epoch (absent if not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
    /// Another key messages naming this node were signed with lately, and dropped for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presented: Option<PresentedKeyInfo>,
}

/// A key a node's messages were signed with that is not the known one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PresentedKeyInfo {
    /// The key, 64 hex digits (the latest, if there were several).
    pub key: String,
    /// When the first such message came, ms since the DTN epoch.
    pub first_seen_ms: u64,
    /// When the latest did.
    pub last_seen_ms: u64,
    /// How many such messages were dropped.
    pub messages: u64,
}

/// The body of `PUT /v1/keys/{node}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AcceptKey {
    /// The key to accept, 64 hex digits; absent: the key the node presented (`presented`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl From<rpc::KnownKey> for KeyInfo {
    fn from(k: rpc::KnownKey) -> Self {
        Self {
            node: k.node.to_string(),
            key: k.key.to_string(),
            source: k.source.name().to_owned(),
            since_ms: k.since.map(DtnTime::as_millis),
            presented: k.presented.map(|p| PresentedKeyInfo {
                key: p.key.to_string(),
                first_seen_ms: p.first_seen.as_millis(),
                last_seen_ms: p.last_seen.as_millis(),
                messages: p.messages,
            }),
        }
    }
}

/// The node a path names: `dtn://bravo/` (percent-encoded as one segment), or just `bravo`.
pub fn parse_key_node(text: &str) -> Result<wire::Eid, ApiError> {
    parse_node(text).map_err(|e| ApiError::new("bad_request", e.to_string()))
}

/// A key given as 64 hex digits.
pub fn parse_key(text: &str) -> Result<seal::PublicKey, ApiError> {
    text.trim()
        .parse()
        .map_err(|e| ApiError::new("bad_request", format!("key {text:?}: {e}")))
}

/// The API error for a refused change of a key.
pub fn key_error(e: rpc::KeyError) -> ApiError {
    let code = match &e {
        rpc::KeyError::Unknown(_) | rpc::KeyError::NothingPresented(_) => "not_found",
        _ => "bad_request",
    };
    ApiError::new(code, e.to_string())
}

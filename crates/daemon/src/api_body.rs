//! Request bodies of the local API: read as they stream in, refused the moment they cross their
//! route's limit, and held by at most `api.max_uploads` requests at once once they are large.
//!
//! A body is the only thing an API client can make the node hold in memory at will, so it has
//! two bounds, both counted in the metrics and logged the first time they are reached:
//!
//! - **Per request**: the raw send's body (the payload as is) may be at most `api.max_payload`
//!   bytes; a JSON body (base64 payloads and file parameters, 4/3 larger) at most
//!   `4/3 × api.max_payload + 4 KiB`. A declared `Content-Length` above it is refused before a
//!   byte is read ([`crate::api_guard`]); a body without one (chunked) is refused with the same
//!   `payload_too_large` (413) as soon as a chunk would take it past the limit, so no more than
//!   the limit is ever buffered ([`Bodies::read`]). Counted in
//!   `ferry_api_payload_too_large_total`.
//! - **Requests at once**: a body larger than [`SMALL_BODY`] needs one of `api.max_uploads`
//!   slots before it is read further (or at all, when its declared length says it will be). A
//!   request that finds none free waits for one, its body unread (TCP's flow control holds the
//!   client back), and is counted in `ferry_api_uploads_waited_total`. The slot is held until
//!   the event loop has taken what the body carried. Small bodies (every ordinary call, key or
//!   send of a short text) take no slot, so a few large uploads never hold them up.
//!
//! So the API's bodies hold at most `max_uploads × 4/3 × max_payload` (plus their decoding,
//! below) and 64 KiB for each other request. The node needs a bundle's payload whole (the
//! bundle is encoded, and its payload file written, from memory), so the raw send cannot go
//! straight to a file; what it avoids is the copy: the body is read into one buffer of the
//! declared size (or grown by doubling, never past the limit) that becomes the payload itself.
//! A JSON body is parsed and dropped before its base64 is decoded, so it peaks at about twice
//! its size.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::body::{Body, Bytes, HttpBody as _};
use axum::http::{HeaderMap, header};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::control::ApiError;

/// A body up to this size takes no upload slot: the ordinary calls and small sends.
pub const SMALL_BODY: usize = 64 << 10;
/// What a JSON body may add around its base64 (field names, options, a call's small parameters).
const JSON_OVERHEAD: u64 = 4096;
/// The route whose body is the payload itself.
pub const RAW_ROUTE: &str = "/v1/bundles/raw";

/// The limits on request bodies and their counters, shared by the guard, the routes and the
/// metrics.
#[derive(Debug, Clone)]
pub struct Bodies(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    max_payload: u64,
    max_uploads: usize,
    slots: Arc<Semaphore>,
    too_large: AtomicU64,
    too_large_logged: AtomicBool,
    waited: AtomicU64,
    waited_logged: AtomicBool,
}

/// A body read whole, with the upload slot it holds (if it was large): keep it until the event
/// loop has taken what the body carried.
#[derive(Debug)]
pub struct Read {
    /// The body.
    pub bytes: Bytes,
    /// The slot; dropping it lets a waiting upload go on.
    pub slot: Option<OwnedSemaphorePermit>,
}

impl Bodies {
    /// Bodies of at most `max_payload` (raw; JSON: 4/3 of it and 4 KiB), with at most
    /// `max_uploads` (at least 1) large ones at once.
    pub fn new(max_payload: usize, max_uploads: usize) -> Self {
        let max_uploads = max_uploads.max(1);
        Self(Arc::new(Inner {
            max_payload: max_payload as u64,
            max_uploads,
            slots: Arc::new(Semaphore::new(max_uploads)),
            too_large: AtomicU64::new(0),
            too_large_logged: AtomicBool::new(false),
            waited: AtomicU64::new(0),
            waited_logged: AtomicBool::new(false),
        }))
    }

    /// The largest body `path` takes: the payload for the raw send, its base64 with some JSON
    /// around it for the others.
    pub fn limit(&self, path: &str) -> u64 {
        if path == RAW_ROUTE {
            self.0.max_payload
        } else {
            self.0.max_payload.saturating_mul(4) / 3 + JSON_OVERHEAD
        }
    }

    /// Counts (and the first time logs) a body refused for its size, and returns the error;
    /// `len` is its declared length, if it had one.
    pub fn too_large(&self, path: &str, len: Option<u64>) -> ApiError {
        let limit = self.limit(path);
        self.count_too_large(limit);
        let what = match len {
            Some(len) => format!("a body of {len} bytes"),
            None => "the body".to_owned(),
        };
        ApiError::new(
            "payload_too_large",
            format!("{what} exceeds this route's limit of {limit} bytes (api.max_payload)"),
        )
    }

    /// As [`Self::too_large`], for a payload of `len` bytes decoded from a JSON body.
    pub fn payload_too_large(&self, len: usize) -> ApiError {
        let limit = self.0.max_payload;
        self.count_too_large(limit);
        ApiError::new(
            "payload_too_large",
            format!(
                "a payload of {len} bytes exceeds this node's api.max_payload of {limit} bytes"
            ),
        )
    }

    fn count_too_large(&self, limit: u64) {
        self.0.too_large.fetch_add(1, Ordering::Relaxed);
        if !self.0.too_large_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "an API request's body exceeded its limit of {limit} bytes (api.max_payload) and \
                 was refused (logged once; the metric ferry_api_payload_too_large_total counts them)"
            );
        }
    }

    /// Bodies refused for their size (declared or streamed).
    pub fn refused_too_large(&self) -> u64 {
        self.0.too_large.load(Ordering::Relaxed)
    }

    /// Uploads that found every slot taken and waited.
    pub fn uploads_waited(&self) -> u64 {
        self.0.waited.load(Ordering::Relaxed)
    }

    /// Large bodies being read or held now.
    pub fn uploads_in_progress(&self) -> u64 {
        (self.0.max_uploads - self.0.slots.available_permits()) as u64
    }

    /// `api.max_uploads`.
    pub fn max_uploads(&self) -> u64 {
        self.0.max_uploads as u64
    }

    /// An upload slot: at once if one is free, else after waiting (counted).
    async fn slot(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        if let Ok(slot) = self.0.slots.clone().try_acquire_owned() {
            return Ok(slot);
        }
        self.0.waited.fetch_add(1, Ordering::Relaxed);
        if !self.0.waited_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "{} large API uploads at once (api.max_uploads): further ones wait for a slot \
                 (logged once; the metric ferry_api_uploads_waited_total counts them)",
                self.0.max_uploads
            );
        }
        // The semaphore is never closed; an error would mean it was, so the node is going.
        self.0
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ApiError::shutting_down())
    }

    /// Reads the body of a request to `path` whole, as it streams in: refused with
    /// `payload_too_large` as soon as it would cross the route's limit (the chunk that would is
    /// not kept, and nothing more is read), and holding an upload slot from the moment it is
    /// (or declares it will be) larger than [`SMALL_BODY`].
    pub async fn read(
        &self,
        path: &str,
        headers: &HeaderMap,
        mut body: Body,
    ) -> Result<Read, ApiError> {
        let limit = usize::try_from(self.limit(path)).unwrap_or(usize::MAX);
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(len) = declared.filter(|&n| n > limit as u64) {
            // The guard refuses these first; this keeps the bound if a route is reached another way.
            return Err(self.too_large(path, Some(len)));
        }
        let declared = declared.map(|n| n as usize);
        let mut slot = None;
        let mut buf: Vec<u8> = Vec::new();
        if let Some(len) = declared {
            if len > SMALL_BODY {
                slot = Some(self.slot().await?);
            }
            // A declared length within the limit is the size of the one buffer (a client that
            // then sends less only wasted its own slot).
            buf.reserve_exact(len);
        }
        loop {
            let frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
            let data = match frame {
                None => break,
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    // Trailers carry nothing a route reads.
                    Err(_) => continue,
                },
                Some(Err(e)) => {
                    return Err(ApiError::new(
                        "bad_request",
                        format!("reading the request body: {e}"),
                    ));
                }
            };
            let len = buf.len().saturating_add(data.len());
            if len > limit {
                return Err(self.too_large(path, None));
            }
            if len > SMALL_BODY && slot.is_none() {
                slot = Some(self.slot().await?);
            }
            if len > buf.capacity() {
                // Doubling keeps the copies few; the limit keeps the buffer within the bound.
                let target = len.max(buf.capacity().saturating_mul(2)).min(limit);
                buf.reserve_exact(target - buf.len());
            }
            buf.extend_from_slice(&data);
        }
        Ok(Read {
            bytes: Bytes::from(buf),
            slot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_body_within_the_limit_is_read_intact_and_one_above_it_is_refused() {
        let rt = runtime();
        let bodies = Bodies::new(100_000, 2);
        let none = HeaderMap::new();
        let payload: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let read = rt
            .block_on(bodies.read(RAW_ROUTE, &none, Body::from(payload.clone())))
            .unwrap();
        assert_eq!(read.bytes, payload);
        assert!(read.slot.is_some(), "a body above SMALL_BODY holds a slot");
        assert_eq!(bodies.uploads_in_progress(), 1);
        drop(read);
        assert_eq!(bodies.uploads_in_progress(), 0);
        let over = vec![0u8; 100_001];
        let e = rt
            .block_on(bodies.read(RAW_ROUTE, &none, Body::from(over)))
            .unwrap_err();
        assert_eq!(e.code, "payload_too_large");
        assert_eq!(bodies.refused_too_large(), 1);
        // A JSON route takes the payload's base64 and some JSON around it.
        let json = vec![b' '; 100_001];
        let read = rt
            .block_on(bodies.read("/v1/bundles", &none, Body::from(json)))
            .unwrap();
        assert_eq!(read.bytes.len(), 100_001);
        // A small body takes no slot.
        let read = rt
            .block_on(bodies.read("/v1/calls", &none, Body::from("{}")))
            .unwrap();
        assert!(read.slot.is_none());
    }

    #[test]
    fn a_large_upload_waits_for_a_slot_and_is_counted() {
        let rt = runtime();
        let bodies = Bodies::new(1 << 20, 1);
        let mut declared = HeaderMap::new();
        declared.insert(header::CONTENT_LENGTH, "200000".parse().unwrap());
        let first = rt
            .block_on(bodies.read(RAW_ROUTE, &declared, Body::from(vec![1u8; 200_000])))
            .unwrap();
        let second = bodies.read(RAW_ROUTE, &declared, Body::from(vec![2u8; 200_000]));
        let waited = rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_millis(100), second).await
        });
        assert!(
            waited.is_err(),
            "the second upload went on while the only slot was held"
        );
        assert_eq!(bodies.uploads_waited(), 1);
        drop(first);
        let second = rt
            .block_on(bodies.read(RAW_ROUTE, &declared, Body::from(vec![2u8; 200_000])))
            .unwrap();
        assert_eq!(second.bytes.len(), 200_000);
    }
}

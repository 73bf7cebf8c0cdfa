//! One procedure provider's WebSocket (`GET /v1/providers`): JSON text messages in and out,
//! checked, and base64 decoded and encoded here, off the event loop. What is registered and
//! which job goes where is [`crate::providers`]'s.
//!
//! The conversation: the provider's first message is `register` (within
//! [`REGISTER_WAIT`]); the node answers `registered` or `error` (and closes). Then the node sends
//! `call`, `cancel`, `kept` and `refused`; the provider sends `result` and `fail`. The socket's
//! end is the provider's disappearance ([`ProviderRequest::Gone`]).
//!
//! **What it never does**: hand a call over before its record is durable (the record is
//! written here, on a blocking thread, then the call sent).

use axum::extract::ws::{Message, WebSocket, close_code};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use serde_json::{Value as Json, json};
use tokio::sync::{mpsc, oneshot};
use wire::rpc::Value;

use crate::api::{close, ws_json};
use crate::control::{ApiError, ControlHandle};
use crate::providers::{
    Answer, CallJob, Declaration, FromProvider, PROVIDER_QUEUE, ProviderRequest, REGISTER_WAIT,
    ToProvider,
};

/// Most jobs a registration may claim (`running` and `held` together).
const MAX_CLAIMS: usize = 4096;

/// Serves one provider until its socket closes or the node stops.
pub async fn serve(control: ControlHandle, mut socket: WebSocket) {
    let first = match tokio::time::timeout(REGISTER_WAIT, next_text(&mut socket)).await {
        Ok(Some(text)) => text,
        Ok(None) => return,
        Err(_) => {
            let e = ApiError::new(
                "bad_request",
                format!("no register message within {} s", REGISTER_WAIT.as_secs()),
            );
            return refuse(socket, e).await;
        }
    };
    let (procedures, running, held) = match serde_json::from_str::<FromProvider>(&first) {
        Ok(FromProvider::Register {
            procedures,
            running,
            held,
        }) => (procedures, running, held),
        Ok(_) => {
            let e = ApiError::new("bad_request", "the first message must be register");
            return refuse(socket, e).await;
        }
        Err(e) => {
            let e = ApiError::new("bad_request", format!("not a provider message: {e}"));
            return refuse(socket, e).await;
        }
    };
    if procedures.is_empty() {
        let e = ApiError::new("bad_request", "register names no procedure");
        return refuse(socket, e).await;
    }
    if running.len() + held.len() > MAX_CLAIMS {
        let e = ApiError::new(
            "bad_request",
            format!("register claims more than {MAX_CLAIMS} jobs"),
        );
        return refuse(socket, e).await;
    }
    let procedures = match procedures
        .into_iter()
        .map(Declaration::check)
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(p) => p,
        Err(message) => return refuse(socket, ApiError::new("bad_request", message)).await,
    };
    let (to, mut from_loop) = mpsc::channel(PROVIDER_QUEUE);
    let (reply, answer) = oneshot::channel();
    let asked = control
        .provider(ProviderRequest::Register {
            procedures,
            running,
            held,
            to,
            reply,
        })
        .await;
    let registered = match (asked, answer.await) {
        (Ok(()), Ok(Ok(registered))) => registered,
        (Ok(()), Ok(Err(e))) => return refuse(socket, e).await,
        _ => return refuse(socket, ApiError::shutting_down()).await,
    };
    let conn = registered.conn;
    if socket
        .send(ws_json(&json!({ "registered": registered })))
        .await
        .is_err()
    {
        let _ = control.provider(ProviderRequest::Gone { conn }).await;
        return;
    }
    loop {
        tokio::select! {
            out = from_loop.recv() => {
                let Some(out) = out else {
                    // The event loop is gone: the node stops.
                    return refuse(socket, ApiError::shutting_down()).await;
                };
                let message = match out {
                    ToProvider::Call(job) => match hand_over(*job).await {
                        Ok(message) => message,
                        Err((job, reason)) => {
                            let answer = Answer::NotHandedOver(reason);
                            let request = ProviderRequest::Answer { conn, job, answer };
                            let _ = control.provider(request).await;
                            continue;
                        }
                    },
                    ToProvider::Cancel { job, reason } => {
                        json!({ "cancel": { "job": job, "reason": reason } })
                    }
                    ToProvider::Kept { job } => json!({ "kept": { "job": job } }),
                    ToProvider::Refused { job, reason } => {
                        json!({ "refused": { "job": job, "reason": reason } })
                    }
                };
                if socket.send(ws_json(&message)).await.is_err() {
                    break;
                }
            }
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    match read_answer(text.as_str()) {
                        Ok((job, answer)) => {
                            let request = ProviderRequest::Answer { conn, job, answer };
                            if control.provider(request).await.is_err() {
                                return refuse(socket, ApiError::shutting_down()).await;
                            }
                        }
                        Err(e) => {
                            // A bad message costs the provider that message, not its
                            // connection: the node says why and reads on.
                            if socket.send(ws_json(&json!({ "error": e }))).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                Some(Ok(Message::Binary(_))) => {
                    let e = ApiError::new("bad_request", "messages are JSON text");
                    if socket.send(ws_json(&json!({ "error": e }))).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = control.provider(ProviderRequest::Gone { conn }).await;
}

/// The next text message, `None` when the socket ends first.
async fn next_text(socket: &mut WebSocket) -> Option<String> {
    loop {
        match socket.recv().await? {
            Ok(Message::Text(t)) => return Some(t.as_str().to_owned()),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// Sends the error and closes.
async fn refuse(mut socket: WebSocket, e: ApiError) {
    if socket.send(ws_json(&json!({ "error": e }))).await.is_ok() {
        close(socket, close_code::POLICY, "refused").await;
    }
}

/// Writes the call's record (synced), then gives the message that hands it over; on failure,
/// the job and why.
async fn hand_over(job: CallJob) -> Result<Json, (String, String)> {
    let record = job.record.clone();
    let (call, caller) = (job.call.clone(), job.caller.clone());
    let extra = format!("provider {}\n", job.procedure);
    let written = tokio::task::spawn_blocking(move || {
        crate::exec::write_record_with(&record, &call, &caller, &extra)
    })
    .await;
    match written {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::error!("writing the record {}: {e}", job.record.display());
            return Err((job.job, format!("its record could not be written: {e}")));
        }
        Err(e) => return Err((job.job, format!("its record could not be written: {e}"))),
    }
    let params: Vec<Json> = job
        .params
        .iter()
        .map(|(name, value, content)| {
            let mut p = match value {
                Value::Bool(b) => json!({ "type": "bool", "value": b }),
                Value::Int(n) => json!({ "type": "int", "value": n }),
                Value::Float(x) if x.is_finite() => json!({ "type": "float", "value": x }),
                // JSON has no NaN or infinity: they come as text Python's float() reads.
                Value::Float(x) => json!({ "type": "float", "value": x.to_string() }),
                Value::Text(t) => json!({ "type": "text", "value": t }),
                Value::Bytes(b) => json!({ "type": "bytes", "b64": BASE64.encode(b) }),
                Value::File(f) => json!({
                    "type": "file",
                    "file_name": f.name,
                    "b64": BASE64.encode(content.as_deref().unwrap_or_default()),
                }),
            };
            if !name.is_empty() {
                p["name"] = json!(name);
            }
            p
        })
        .collect();
    Ok(json!({ "call": {
        "job": job.job,
        "call": job.call,
        "procedure": job.procedure,
        "caller": job.caller,
        "caller_key": job.caller_key,
        "deadline_ms": job.deadline.as_millis(),
        "timeout_ms": job.timeout.as_millis() as u64,
        "params": params,
    }}))
}

/// A `result` or `fail` message, decoded.
fn read_answer(text: &str) -> Result<(String, Answer), ApiError> {
    let bad = |m: String| ApiError::new("bad_request", m);
    match serde_json::from_str::<FromProvider>(text) {
        Err(e) => Err(bad(format!("not a provider message: {e}"))),
        Ok(FromProvider::Register { .. }) => Err(bad("already registered".into())),
        Ok(FromProvider::Fail { job, message }) => Ok((job, Answer::Fail(message))),
        Ok(FromProvider::Result {
            job,
            value,
            value_b64,
            files,
        }) => {
            let value = match (value, value_b64) {
                (Some(_), Some(_)) => {
                    return Err(bad(format!("job {job}: value and value_b64 both given")));
                }
                (Some(t), None) => Bytes::from(t),
                (None, Some(b)) => Bytes::from(
                    BASE64
                        .decode(b)
                        .map_err(|e| bad(format!("job {job}: value_b64: {e}")))?,
                ),
                (None, None) => Bytes::new(),
            };
            let files = files
                .into_iter()
                .map(|f| {
                    let content = BASE64
                        .decode(&f.content_b64)
                        .map_err(|e| bad(format!("job {job}: file {:?}: {e}", f.name)))?;
                    Ok((f.name, Bytes::from(content)))
                })
                .collect::<Result<Vec<_>, ApiError>>()?;
            Ok((job, Answer::Value { value, files }))
        }
    }
}

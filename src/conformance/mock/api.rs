//! A loopback mock of the Anthropic Messages API, for driving the real Claude Code CLI (the conformance check and the end-to-end tests): HTTP/1.1 on 127.0.0.1 and an ephemeral port, std only, `POST /v1/messages` answered as SSE from a script of replies, each with its own status, rate-limit headers and content blocks. Nothing leaves the machine.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::http as mock_http;

/// One content block of a scripted reply.
#[derive(Debug, Clone)]
pub(crate) enum Block {
    Text(String),
    ToolUse { name: String, input: Value },
}

/// One scripted answer to one `POST /v1/messages`.
#[derive(Debug, Clone)]
pub struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) blocks: Vec<Block>,
}

impl Reply {
    /// A 200 with these blocks; ends the turn unless a block is a tool call.
    pub(crate) fn blocks(blocks: Vec<Block>) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            blocks,
        }
    }

    pub fn text(text: &str) -> Reply {
        Reply::blocks(vec![Block::Text(text.into())])
    }

    pub fn tool(name: &str, input: Value) -> Reply {
        Reply::blocks(vec![Block::ToolUse {
            name: name.into(),
            input,
        }])
    }

    /// Adds the unified rate-limit headers of a plan login: status, the representative
    /// claim, and five-hour utilization (a fraction) with its reset (epoch seconds).
    pub fn with_five_hour(self, status: &str, utilization: f64, reset: i64) -> Reply {
        self.with_plan(status, utilization, 0.2, reset)
    }

    /// Like [`Reply::with_five_hour`], with the seven-day figure too.
    pub fn with_plan(mut self, status: &str, utilization: f64, weekly: f64, reset: i64) -> Reply {
        let h = |k: &str, v: String| (format!("anthropic-ratelimit-unified-{k}"), v);
        self.headers.extend([
            h("status", status.into()),
            h("reset", reset.to_string()),
            h("representative-claim", "five_hour".into()),
            h("5h-utilization", utilization.to_string()),
            h("5h-reset", reset.to_string()),
            h("7d-utilization", weekly.to_string()),
            h("7d-reset", (reset + 4 * 86_400).to_string()),
        ]);
        self
    }

    /// Adds a warning that five-hour utilization passed `threshold` (a fraction): the
    /// header that makes the CLI emit an `allowed_warning` with `utilization`.
    pub fn with_five_hour_warning(mut self, threshold: f64) -> Reply {
        self.headers.push((
            "anthropic-ratelimit-unified-5h-surpassed-threshold".into(),
            threshold.to_string(),
        ));
        self
    }

    /// Adds one `anthropic-ratelimit-unified-<name>` header.
    pub fn unified(mut self, name: &str, value: impl ToString) -> Reply {
        self.headers.push((
            format!("anthropic-ratelimit-unified-{name}"),
            value.to_string(),
        ));
        self
    }

    /// Adds the per-model weekly Window (the claim `7d_oi`, the CLI's "Fable limit"): its
    /// utilization (a fraction) and reset, and `rejected` once it is used up.
    pub fn with_model_week(self, utilization: f64, reset: i64) -> Reply {
        let status = if utilization >= 1.0 {
            "rejected"
        } else {
            "allowed"
        };
        self.unified("7d_oi-utilization", utilization)
            .unified("7d_oi-reset", reset)
            .unified("7d_oi-status", status)
    }

    /// Marks the response as billed to extra usage (usage credits): the overage headers a
    /// plan sends when it lets a request through on credits (2.1.332 PROTOCOL §3).
    pub fn on_credits(self) -> Reply {
        self.unified("overage-status", "allowed")
            .unified("overage-in-use", "true")
    }

    /// An API error of `status` (500: `api_error`), as the API words it.
    pub fn error(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            blocks: Vec::new(),
        }
    }

    /// A 429 rejection of the five-hour window until `reset`.
    pub fn rejected(reset: i64) -> Reply {
        let mut r = Reply {
            status: 429,
            headers: Vec::new(),
            blocks: Vec::new(),
        }
        .with_five_hour("rejected", 1.0, reset);
        r.headers.push(("retry-after".into(), "7200".into()));
        r
    }
}

/// The running mock; it stops serving when dropped (the listener thread is detached and
/// the test process ends soon after).
pub struct MockApi {
    pub port: u16,
    script: mock_http::Script<Reply>,
    /// Every request body received, in order.
    pub requests: Arc<Mutex<Vec<Value>>>,
}

impl MockApi {
    /// Listens on 127.0.0.1 and a port the kernel picks.
    pub fn start() -> std::io::Result<MockApi> {
        let script = mock_http::Script::new();
        let serving = script.clone();
        let port = mock_http::serve(true, move |req| answer(req, &serving))?;
        Ok(MockApi {
            port,
            requests: script.requests.clone(),
            script,
        })
    }

    /// Sets the replies for the next calls, in order; after them, a final text reply.
    pub fn script(&self, replies: Vec<Reply>) {
        self.script.set(replies);
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// How many Messages API calls were made.
    pub fn calls(&self) -> usize {
        self.script.calls()
    }
}

fn answer(req: &mock_http::Request, script: &mock_http::Script<Reply>) -> Vec<u8> {
    if req.path.starts_with("/v1/messages") && !req.path.contains("count_tokens") {
        render(&script.answer(&req.body, false, Reply::text("Done.")))
    } else {
        http(
            404,
            &[],
            "application/json",
            br#"{"type":"error","error":{"type":"not_found_error","message":"mock"}}"#,
        )
    }
}

fn http(status: u16, headers: &[(String, String)], content_type: &str, body: &[u8]) -> Vec<u8> {
    mock_http::response(status, headers, content_type, body)
}

/// Tool-use ids must be unique within a conversation.
static TOOL_IDS: AtomicUsize = AtomicUsize::new(1);

fn render(reply: &Reply) -> Vec<u8> {
    if reply.status != 200 {
        let kind = match reply.status {
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        let body = json!({"type": "error", "error": {"type": kind, "message": "mock: refused"}});
        return http(
            reply.status,
            &reply.headers,
            "application/json",
            body.to_string().as_bytes(),
        );
    }
    let id = format!("msg_mock_{}", std::process::id());
    let mut sse = String::new();
    let mut event =
        |name: &str, data: Value| sse.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": "claude-opus-4-8", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    );
    let mut tool = false;
    for (i, block) in reply.blocks.iter().enumerate() {
        match block {
            Block::Text(text) => {
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}),
                );
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": text}}),
                );
            }
            Block::ToolUse { name, input } => {
                tool = true;
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": format!("toolu_mock_{}", TOOL_IDS.fetch_add(1, Ordering::SeqCst)), "name": name, "input": {}}}),
                );
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
                );
            }
        }
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    let stop = if tool { "tool_use" } else { "end_turn" };
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 20}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    http(200, &reply.headers, "text/event-stream", sse.as_bytes())
}

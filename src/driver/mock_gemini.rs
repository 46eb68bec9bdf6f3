//! A loopback mock of the Gemini API (generativelanguage v1beta), for driving the real Gemini CLI: std only, 127.0.0.1, a port the kernel picks; `streamGenerateContent` answered as SSE from a script of steps, the router's `generateContent` with a fixed classification. Ported from the recording's `mock_gemini.py`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::{json, Value};

/// One scripted answer to one `streamGenerateContent`.
#[derive(Debug, Clone)]
pub struct Step {
    pub status: u16,
    /// The JSON body of a non-200 answer.
    pub body: Value,
    pub text: Option<String>,
    /// A `functionCall` part: `{"name": …, "args": {…}}`.
    pub call: Option<Value>,
}

impl Step {
    pub fn text(text: &str) -> Step {
        Step {
            status: 200,
            body: Value::Null,
            text: Some(text.into()),
            call: None,
        }
    }

    /// A shell command the model asks the CLI to run.
    pub fn shell(command: &str) -> Step {
        Step {
            status: 200,
            body: Value::Null,
            text: None,
            call: Some(
                json!({"name": "run_shell_command", "args": {"command": command, "description": "owl mock"}}),
            ),
        }
    }

    /// A daily-quota 429, which the CLI does not retry (PROTOCOL.md §6).
    pub fn daily_quota() -> Step {
        Step {
            status: 429,
            body: json!({"error": {"code": 429, "message": "You have exhausted your daily quota on this model.", "status": "RESOURCE_EXHAUSTED",
                "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
                            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "43200s"}]}}),
            text: None,
            call: None,
        }
    }
}

/// The running mock; it serves until the process ends.
pub struct MockGemini {
    pub port: u16,
    script: Arc<Mutex<Vec<Step>>>,
    /// Every `streamGenerateContent` body received, in order.
    pub requests: Arc<Mutex<Vec<Value>>>,
}

impl MockGemini {
    pub fn start() -> std::io::Result<MockGemini> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let script = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (script.clone(), requests.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (s, r) = (s.clone(), r.clone());
                thread::spawn(move || serve(stream, &s, &r));
            }
        });
        Ok(MockGemini {
            port,
            script,
            requests,
        })
    }

    /// The steps for the next calls, in order; the last one repeats.
    pub fn script(&self, steps: Vec<Step>) {
        *self.script.lock().unwrap_or_else(|p| p.into_inner()) = steps;
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// How many `streamGenerateContent` calls were made.
    pub fn calls(&self) -> usize {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

fn serve(stream: TcpStream, script: &Mutex<Vec<Step>>, requests: &Mutex<Vec<Value>>) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut out = stream;
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let mut content_length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                content_length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; content_length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    let path = path.split('?').next().unwrap_or("");
    let response = if path.ends_with(":streamGenerateContent") {
        requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
        let step = {
            let mut steps = script.lock().unwrap_or_else(|p| p.into_inner());
            if steps.len() > 1 {
                steps.remove(0)
            } else {
                steps
                    .first()
                    .cloned()
                    .unwrap_or_else(|| Step::text("Done."))
            }
        };
        render(&step)
    } else if path.ends_with(":generateContent") {
        // The CLI's model router asks how hard the prompt is.
        let verdict = json!({"complexity_reasoning": "mock", "complexity_score": 10, "reasoning": "mock", "model_choice": "flash"});
        let body = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": verdict.to_string()}]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11}});
        http(200, "application/json", body.to_string().as_bytes())
    } else if path.ends_with(":countTokens") {
        http(200, "application/json", br#"{"totalTokens":1234}"#)
    } else {
        http(
            404,
            "application/json",
            br#"{"error":{"code":404,"message":"mock: no route","status":"NOT_FOUND"}}"#,
        )
    };
    let _ = out.write_all(&response).and_then(|()| out.flush());
}

fn http(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        429 => "Too Many Requests",
        _ => "Status",
    };
    let mut bytes = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn render(step: &Step) -> Vec<u8> {
    if step.status != 200 {
        return http(
            step.status,
            "application/json",
            step.body.to_string().as_bytes(),
        );
    }
    let mut parts = Vec::new();
    if let Some(text) = &step.text {
        parts.push(json!({"text": text}));
    }
    if let Some(call) = &step.call {
        parts.push(json!({"functionCall": call}));
    }
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0, "finishReason": "STOP"}],
        "modelVersion": "mock-model",
        "responseId": "mock-response",
        "usageMetadata": {"promptTokenCount": 1234, "candidatesTokenCount": 56, "totalTokenCount": 1290},
    });
    http(
        200,
        "text/event-stream",
        format!("data: {chunk}\r\n\r\n").as_bytes(),
    )
}

//! The plumbing both loopback mocks share: a listener on 127.0.0.1 (a port the kernel picks), each connection served on its own thread, requests read and responses written as HTTP/1.1 with a content length.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use std::thread;

/// One request, as the mocks need it.
pub(super) struct Request {
    /// The path without its query.
    pub path: String,
    pub body: Vec<u8>,
}

/// Serves `answer` on 127.0.0.1 until the process ends; returns the port. With
/// `keep_alive`, a connection may carry many requests; without, one.
pub(super) fn serve(
    keep_alive: bool,
    answer: impl Fn(&Request) -> Vec<u8> + Send + Sync + 'static,
) -> std::io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let answer = Arc::new(answer);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let answer = answer.clone();
            thread::spawn(move || connection(stream, keep_alive, answer.as_ref()));
        }
    });
    Ok(port)
}

fn connection(stream: TcpStream, keep_alive: bool, answer: &dyn Fn(&Request) -> Vec<u8>) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut out = stream;
    while let Some(request) = read_request(&mut reader) {
        if out
            .write_all(&answer(&request))
            .and_then(|()| out.flush())
            .is_err()
            || !keep_alive
        {
            return;
        }
    }
}

fn read_request(reader: &mut impl BufRead) -> Option<Request> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).ok()? == 0 {
        return None;
    }
    let mut content_length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
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
    reader.read_exact(&mut body).ok()?;
    let target = request_line.split_whitespace().nth(1).unwrap_or("");
    Some(Request {
        path: target.split('?').next().unwrap_or("").to_string(),
        body,
    })
}

/// A response with these headers and body.
pub(super) fn response(
    status: u16,
    headers: &[(String, String)],
    content_type: &str,
    body: &[u8],
) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nrequest-id: req_mock\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// A mock's script of answers and the bodies it was sent, shared by its serving threads.
pub(super) struct Script<S> {
    steps: Arc<Mutex<Vec<S>>>,
    /// Every scripted request's body, in order.
    pub requests: Arc<Mutex<Vec<Value>>>,
}

impl<S> Clone for Script<S> {
    fn clone(&self) -> Self {
        Script {
            steps: self.steps.clone(),
            requests: self.requests.clone(),
        }
    }
}

impl<S: Clone> Script<S> {
    pub(super) fn new() -> Script<S> {
        Script {
            steps: Arc::new(Mutex::new(Vec::new())),
            requests: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The answers to the next requests, in order.
    pub(super) fn set(&self, steps: Vec<S>) {
        *self.steps.lock().unwrap_or_else(|p| p.into_inner()) = steps;
    }

    /// How many scripted requests came.
    pub(super) fn calls(&self) -> usize {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Records a request's body and gives its answer: the next step; after the last one,
    /// the last again (`repeat_last`, so one error step is a lasting error) or `fallback`.
    pub(super) fn answer(&self, body: &[u8], repeat_last: bool, fallback: S) -> S {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(serde_json::from_slice(body).unwrap_or(Value::Null));
        let mut steps = self.steps.lock().unwrap_or_else(|p| p.into_inner());
        match steps.len() {
            0 => fallback,
            1 if repeat_last => steps[0].clone(),
            _ => steps.remove(0),
        }
    }
}

//! Every wait with a deadline on what a child process sends (its exit, its next line, a reader's end): the one place owl waits on a channel with a timeout, so that a stop of owl's and a deadline are honoured the same way everywhere.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How a wait ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Waited<T> {
    /// What was waited for came.
    Got(T),
    /// The sender is gone: nothing more will come (a stream closed, a thread ended).
    Closed,
    /// The deadline passed first.
    TimedOut,
    /// The caller's stop condition held first.
    Stopped,
}

/// Runs `blocking` (a child's `wait`, a stream read to its end) on a thread of its own; its
/// answer arrives on the channel returned, to be waited for with [`until`] or [`within`].
pub(crate) fn on_thread<T: Send + 'static>(
    blocking: impl FnOnce() -> T + Send + 'static,
) -> Receiver<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(blocking());
    });
    rx
}

/// The next message on `rx`, or why none came by `deadline`. With `stop`, the wait asks it
/// every `poll` (a stop of owl's, a cancel) and ends at once when it holds; without, it
/// sleeps on the channel alone until the deadline.
pub(crate) fn until<T>(
    rx: &Receiver<T>,
    deadline: Instant,
    mut stop: Option<(Duration, &mut dyn FnMut() -> bool)>,
) -> Waited<T> {
    loop {
        if let Some((_, stopped)) = stop.as_mut() {
            if stopped() {
                return Waited::Stopped;
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let slice = stop.as_ref().map_or(left, |(poll, _)| left.min(*poll));
        match rx.recv_timeout(slice) {
            Ok(got) => return Waited::Got(got),
            Err(RecvTimeoutError::Disconnected) => return Waited::Closed,
            Err(RecvTimeoutError::Timeout) if Instant::now() >= deadline => {
                return Waited::TimedOut
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

/// The next message on `rx` within `limit`; `None` when it closed or the time ran out.
pub(crate) fn within<T>(rx: &Receiver<T>, limit: Duration) -> Option<T> {
    match until(rx, Instant::now() + limit, None) {
        Waited::Got(got) => Some(got),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_ends_the_wait_and_a_closed_sender_says_so() {
        let rx = on_thread(|| 7);
        assert_eq!(within(&rx, Duration::from_secs(10)), Some(7));
        assert_eq!(
            until(&rx, Instant::now() + Duration::from_secs(10), None),
            Waited::Closed
        );
    }

    #[test]
    fn the_deadline_ends_a_wait_on_a_silent_sender() {
        let (_tx, rx) = mpsc::channel::<()>();
        let deadline = Instant::now() + Duration::from_millis(30);
        assert_eq!(until(&rx, deadline, None), Waited::TimedOut);
        assert!(Instant::now() >= deadline);
    }

    #[test]
    fn the_stop_condition_is_asked_while_waiting() {
        let (_tx, rx) = mpsc::channel::<()>();
        let mut asked = 0;
        let mut stop = || {
            asked += 1;
            asked == 3
        };
        let far = Instant::now() + Duration::from_secs(600);
        let waited = until(&rx, far, Some((Duration::from_millis(1), &mut stop)));
        assert_eq!(waited, Waited::Stopped);
        assert_eq!(asked, 3);
    }
}

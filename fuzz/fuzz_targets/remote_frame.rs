//! Fuzzes the remote-reader wire protocol: the input is what a peer sends,
//! read frame by frame as the hub and the agent read it
//! (`remote::proto::read_message`) until the stream ends or is refused.
//! Every message read must frame back to exactly the bytes it was read
//! from (the encoding is canonical). Nothing may panic.

#![no_main]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use libfuzzer_sys::fuzz_target;
use remote::proto::{frame, read_message, Message};

fuzz_target!(|data: &[u8]| {
    let _ = Message::decode(data);
    let mut rest = data;
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        let before = rest;
        let read = {
            let mut fut = pin!(read_message(&mut rest));
            // A byte slice never makes a read wait.
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(r) => r,
                Poll::Pending => panic!("reading from memory is pending"),
            }
        };
        let Ok(m) = read else { break };
        let used = &before[..before.len() - rest.len()];
        let again = frame(&m).expect("a message read frames again");
        assert_eq!(again, used, "{m:?} does not frame back to its bytes");
    }
});

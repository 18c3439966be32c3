//! What the conversation's phases produce, in order: events for the caller and bytes for
//! the server.

use super::event::Event;
use bytes::BytesMut;
use std::collections::VecDeque;

/// What the phases produce: events for the caller and bytes for the server, in order.
#[derive(Debug, Default)]
pub(crate) struct Output {
    pub(crate) events: VecDeque<Event>,
    pub(crate) transmit: BytesMut,
    /// The authentication method the server asked for, once it asked.
    pub(crate) method: Option<&'static str>,
}

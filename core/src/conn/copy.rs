//! The two COPY modes a query can switch into: COPY OUT (`COPY ... TO STDOUT`, rows as
//! CopyData) and CopyBoth (`START_REPLICATION`, replication messages both ways).
//!
//! This module owns the order of messages inside those modes and the client's half of
//! CopyBoth (status updates, CopyDone). It never parses COPY rows (that is `copy`) nor WAL
//! payloads (that is `pgoutput`), and never decides when to acknowledge.

use bytes::BytesMut;

use super::event::{ConnError, Event, UsageError};
use super::query::Query;
use super::Outbox;
use crate::wire::backend::BackendMessage;
use crate::wire::framing::HEADER_LEN;
use crate::wire::frontend::{self, StatusUpdate};
use crate::wire::replication::ReplicationMessage;

/// COPY OUT: CopyData until CopyDone, then the statement's CommandComplete.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CopyOut {
    Receiving,
    /// CopyDone came; CommandComplete follows.
    Finished,
}

impl CopyOut {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            CopyOut::Receiving => "COPY OUT (receiving data)",
            CopyOut::Finished => "COPY OUT (after CopyDone)",
        }
    }

    pub(crate) fn handle(
        self,
        message: BackendMessage,
        out: &mut Outbox,
        during: &'static str,
    ) -> Result<Query, ConnError> {
        match (self, message) {
            (CopyOut::Receiving, BackendMessage::CopyData(data)) => {
                out.events.push_back(Event::CopyOutData(data));
                Ok(Query::CopyOut(CopyOut::Receiving))
            }
            (CopyOut::Receiving, BackendMessage::CopyDone) => {
                out.events.push_back(Event::CopyOutDone);
                Ok(Query::CopyOut(CopyOut::Finished))
            }
            (CopyOut::Finished, BackendMessage::CommandComplete { tag }) => {
                out.events.push_back(Event::CommandComplete { tag });
                Ok(Query::AwaitResult)
            }
            (_, message) => Err(ConnError::Unexpected {
                message: message.name(),
                during,
            }),
        }
    }
}

/// CopyBoth streaming. Each side ends its half with CopyDone; the statement completes
/// (CommandComplete) once the server has sent its CopyDone.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct CopyBoth {
    /// We sent CopyDone: no more CopyData may leave.
    pub(crate) client_done: bool,
    /// The server sent CopyDone. CopyData may still arrive afterwards (keepalives during
    /// a clean stop, seen on real servers) and is delivered as usual.
    pub(crate) server_done: bool,
}

impl CopyBoth {
    pub(crate) fn handle(
        mut self,
        message: BackendMessage,
        frame_offset: u64,
        out: &mut Outbox,
        during: &'static str,
    ) -> Result<Query, ConnError> {
        match message {
            BackendMessage::CopyData(payload) => {
                let event = match ReplicationMessage::parse(&payload) {
                    Ok(ReplicationMessage::XLogData(data)) => Event::XLogData(data),
                    Ok(ReplicationMessage::Keepalive(keepalive)) => Event::Keepalive(keepalive),
                    Err(error) => {
                        return Err(ConnError::Decode {
                            stream_offset: frame_offset,
                            error: error.shifted(HEADER_LEN),
                        })
                    }
                };
                out.events.push_back(event);
                Ok(Query::CopyBoth(self))
            }
            BackendMessage::CopyDone if !self.server_done => {
                self.server_done = true;
                out.events.push_back(Event::StreamServerDone);
                Ok(Query::CopyBoth(self))
            }
            BackendMessage::CommandComplete { tag } if self.server_done => {
                out.events.push_back(Event::CommandComplete { tag });
                Ok(Query::AwaitResult)
            }
            // After a physical timeline ends the server reports the next timeline as a
            // result set; logical replication does not, but the order is the same.
            BackendMessage::RowDescription(description) if self.server_done => {
                out.events.push_back(Event::RowDescription(description));
                Ok(Query::Rows)
            }
            message => Err(ConnError::Unexpected {
                message: message.name(),
                during,
            }),
        }
    }

    /// Queues a Standby Status Update.
    pub(crate) fn send_status_update(
        &mut self,
        update: &StatusUpdate,
        transmit: &mut BytesMut,
    ) -> Result<(), UsageError> {
        if self.client_done {
            return Err(UsageError::StreamAlreadyFinished);
        }
        frontend::encode_status_update(update, transmit);
        Ok(())
    }

    /// Queues our CopyDone: the client ends its half of the stream.
    pub(crate) fn finish(&mut self, transmit: &mut BytesMut) -> Result<(), UsageError> {
        if self.client_done {
            return Err(UsageError::StreamAlreadyFinished);
        }
        self.client_done = true;
        frontend::encode_copy_done(transmit);
        Ok(())
    }
}

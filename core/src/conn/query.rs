//! One simple query, from the Query message to ReadyForQuery: the results of each of its
//! statements (rows, command tags, empty queries, errors), and the two COPY modes a query
//! can switch into: COPY OUT (`COPY ... TO STDOUT`, rows as CopyData) and CopyBoth
//! (`START_REPLICATION`, replication messages both ways).
//!
//! This module owns which result message may follow which, the order of messages inside
//! the COPY modes and the client's half of CopyBoth (status updates, CopyDone). It never
//! interprets row values or COPY rows (that is `crate::copy`), nor WAL payloads (that is
//! `pgoutput`), and never decides what to query or when to acknowledge.

use super::event::{ConnError, Event, UsageError};
use super::output::Output;
use crate::wire::backend::{BackendMessage, TransactionStatus};
use crate::wire::framing::HEADER_LEN;
use crate::wire::frontend::{self, StatusUpdate};
use crate::wire::replication::ReplicationMessage;
use bytes::BytesMut;

/// Where the running query stands.
#[derive(Debug)]
pub(crate) enum Query {
    /// Between statements: the next result, or ReadyForQuery.
    AwaitResult,
    /// A RowDescription came: DataRows until CommandComplete.
    Rows,
    CopyOut(CopyOut),
    CopyBoth(CopyBoth),
    /// An error ended the query; the server skips the rest and sends ReadyForQuery.
    AwaitReady,
}

/// What the caller should do after a query message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum QueryStep {
    Continue,
    Done(TransactionStatus),
}

impl Query {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Query::AwaitResult => "a query (awaiting a result)",
            Query::Rows => "a query (receiving rows)",
            Query::CopyOut(copy) => copy.name(),
            Query::CopyBoth(_) => "replication streaming (CopyBoth)",
            Query::AwaitReady => "a failed query (awaiting ReadyForQuery)",
        }
    }

    pub(crate) fn handle(
        &mut self,
        message: BackendMessage,
        frame_offset: u64,
        out: &mut Output,
    ) -> Result<QueryStep, ConnError> {
        if let BackendMessage::ErrorResponse(err) = message {
            // Every statement result, COPY mode included, may end in an error; the server
            // then abandons the query and sends ReadyForQuery.
            out.events.push_back(Event::QueryError(err));
            *self = Query::AwaitReady;
            return Ok(QueryStep::Continue);
        }
        let during = self.name();
        let next = match (std::mem::replace(self, Query::AwaitReady), message) {
            (Query::AwaitResult | Query::AwaitReady, BackendMessage::ReadyForQuery(status)) => {
                return Ok(QueryStep::Done(status))
            }
            (Query::AwaitResult, BackendMessage::RowDescription(description)) => {
                out.events.push_back(Event::RowDescription(description));
                Query::Rows
            }
            (Query::Rows, BackendMessage::DataRow(row)) => {
                out.events.push_back(Event::DataRow(row));
                Query::Rows
            }
            (Query::AwaitResult | Query::Rows, BackendMessage::CommandComplete { tag }) => {
                out.events.push_back(Event::CommandComplete { tag });
                Query::AwaitResult
            }
            (Query::AwaitResult, BackendMessage::EmptyQueryResponse) => {
                out.events.push_back(Event::EmptyQuery);
                Query::AwaitResult
            }
            (Query::AwaitResult, BackendMessage::CopyOutResponse(response)) => {
                out.events.push_back(Event::CopyOutStarted(response));
                Query::CopyOut(CopyOut::Receiving)
            }
            (Query::AwaitResult, BackendMessage::CopyBothResponse(response)) => {
                out.events.push_back(Event::StreamStarted(response));
                Query::CopyBoth(CopyBoth::default())
            }
            (Query::AwaitResult, BackendMessage::CopyInResponse(_)) => {
                // slotline never sends COPY data: refuse, and the server answers with an
                // ErrorResponse naming our reason, then ReadyForQuery.
                frontend::encode_copy_fail(
                    "slotline does not send COPY FROM STDIN data",
                    &mut out.transmit,
                )
                .map_err(ConnError::Encode)?;
                Query::AwaitResult
            }
            (Query::CopyOut(copy), message) => copy.handle(message, out, during)?,
            (Query::CopyBoth(stream), message) => {
                stream.handle(message, frame_offset, out, during)?
            }
            (_, message) => {
                return Err(ConnError::Unexpected {
                    message: message.name(),
                    during,
                })
            }
        };
        *self = next;
        Ok(QueryStep::Continue)
    }

    /// The CopyBoth state, when the query is streaming.
    pub(crate) fn stream_mut(&mut self) -> Option<&mut CopyBoth> {
        match self {
            Query::CopyBoth(stream) => Some(stream),
            _ => None,
        }
    }
}

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
        out: &mut Output,
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
        out: &mut Output,
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

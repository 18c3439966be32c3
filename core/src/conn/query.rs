//! One simple query, from the Query message to ReadyForQuery: the results of each of its
//! statements (rows, command tags, empty queries, errors) and the switch into COPY modes.
//!
//! This module owns which result message may follow which. It never interprets row values
//! and never decides what to query; the COPY sub-states live in `copy`.

use super::copy::{CopyBoth, CopyOut};
use super::event::{ConnError, Event};
use super::Outbox;
use crate::wire::backend::{BackendMessage, TransactionStatus};
use crate::wire::frontend;

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
        out: &mut Outbox,
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

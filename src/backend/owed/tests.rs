use super::*;
use crate::protocol::tags::be::*;
use Disposition::{Drop, Forward};

/// Feeds server message types; returns each disposition and the synthetic
/// bytes that became due.
fn run(r: &mut Owed, tags: &[u8]) -> (Vec<Result<Disposition, Unexpected>>, Vec<u8>) {
    let mut fixes = Vec::new();
    let mut due = Vec::new();
    let out = tags
        .iter()
        .map(|&t| {
            r.take_due(&mut due, &mut fixes);
            r.on_server(t, None, &mut fixes)
        })
        .collect();
    r.take_due(&mut due, &mut fixes);
    (out, due)
}

fn push_all(r: &mut Owed, es: &[Expect]) -> Vec<CacheFix> {
    let mut fixes = Vec::new();
    for e in es {
        r.push(e.clone(), &mut fixes);
    }
    fixes
}

fn client(tags: &[u8]) -> Vec<Expect> {
    tags.iter()
        .map(|&t| match (t, Reply::for_frontend(t)) {
            (b'd', _) => Expect::CopyData,
            (_, Some(r)) => Expect::Client(r),
            (_, None) => Expect::CopyEnd,
        })
        .collect()
}

fn all_forward(d: &[Result<Disposition, Unexpected>]) -> bool {
    d.iter().all(|x| *x == Ok(Forward))
}

#[test]
fn injected_parse_reply_is_dropped_and_synthetic_is_due_in_order() {
    let mut r = Owed::default();
    push_all(
        &mut r,
        &[
            Expect::Injected(Reply::Parse {
                id: Some(1),
                def: None,
            }),
            Expect::Client(Reply::Bind { stmt: None }),
            Expect::Owed(Synthetic::CloseComplete),
            Expect::Client(Reply::Execute),
            Expect::Client(Reply::Sync),
        ],
    );
    let (d, due) = run(&mut r, &[PARSE_COMPLETE, BIND_COMPLETE, DATA_ROW, DATA_ROW]);
    assert_eq!(d, vec![Ok(Drop), Ok(Forward), Ok(Forward), Ok(Forward)]);
    assert_eq!(due, vec![CLOSE_COMPLETE, 0, 0, 0, 4]);
    let (d, _) = run(&mut r, &[COMMAND_COMPLETE, READY_FOR_QUERY]);
    assert!(all_forward(&d));
    assert!(r.is_empty());
}

#[test]
fn error_skips_to_sync_and_undoes_cache_changes() {
    let mut r = Owed::default();
    push_all(
        &mut r,
        &[
            Expect::Client(Reply::Parse {
                id: Some(1),
                def: Some(1),
            }),
            Expect::Injected(Reply::Close { evicted: Some(2) }),
            Expect::Client(Reply::Parse {
                id: Some(3),
                def: Some(3),
            }),
            Expect::Owed(Synthetic::CloseComplete),
            Expect::Client(Reply::Sync),
        ],
    );
    let mut fixes = Vec::new();
    assert_eq!(r.on_server(ERROR_RESPONSE, None, &mut fixes), Ok(Forward));
    assert_eq!(
        fixes,
        vec![
            CacheFix::Forget(1),
            CacheFix::Undefine(1),
            CacheFix::Restore(2),
            CacheFix::Forget(3),
            CacheFix::Undefine(3),
        ]
    );
    let mut due = Vec::new();
    r.take_due(&mut due, &mut fixes);
    assert!(due.is_empty(), "a skipped synthetic reply is never sent");
    assert_eq!(r.on_server(READY_FOR_QUERY, None, &mut fixes), Ok(Forward));
    assert!(r.is_empty());
}

#[test]
fn a_skipped_pooler_error_takes_its_text_with_it() {
    // Batch 1: the server's error skips the pooler's 42P05; batch 2 owes
    // its own 42P05, and that is the one the client must see.
    let mut r = Owed::default();
    push_all(
        &mut r,
        &[
            Expect::Client(Reply::Execute),
            Expect::Owed(Synthetic::Error(b"first".to_vec().into())),
            Expect::Client(Reply::Sync),
            Expect::Owed(Synthetic::Error(b"second".to_vec().into())),
            Expect::Client(Reply::Sync),
        ],
    );
    let (d, due) = run(&mut r, &[ERROR_RESPONSE, READY_FOR_QUERY, READY_FOR_QUERY]);
    assert!(all_forward(&d));
    assert_eq!(due, b"second");
    assert!(r.is_empty());
}

#[test]
fn error_before_the_client_sent_sync_skips_later_messages() {
    let mut r = Owed::default();
    push_all(&mut r, &[Expect::Client(Reply::Bind { stmt: None })]);
    let mut fixes = Vec::new();
    assert_eq!(r.on_server(ERROR_RESPONSE, None, &mut fixes), Ok(Forward));
    let fixes = push_all(
        &mut r,
        &[
            Expect::Injected(Reply::Parse {
                id: Some(9),
                def: None,
            }),
            Expect::Client(Reply::Execute),
            Expect::Client(Reply::Query { follows: false }),
            Expect::Client(Reply::Sync),
        ],
    );
    assert_eq!(fixes, vec![CacheFix::Forget(9)]);
    let (d, _) = run(&mut r, &[READY_FOR_QUERY]);
    assert!(all_forward(&d));
    assert!(r.is_empty());
}

#[test]
fn simple_query_keeps_errors_and_copy_inside_its_reply() {
    let mut r = Owed::default();
    push_all(&mut r, &client(b"Q"));
    let (d, _) = run(
        &mut r,
        &[
            ROW_DESCRIPTION,
            DATA_ROW,
            COMMAND_COMPLETE,
            ERROR_RESPONSE,
            COPY_OUT_RESPONSE,
            COPY_DATA,
            COPY_DONE,
            COMMAND_COMPLETE,
            NOTICE_RESPONSE,
            PARAMETER_STATUS,
            READY_FOR_QUERY,
        ],
    );
    assert!(all_forward(&d));
    assert!(r.is_empty());
    assert_eq!(r.copy(), None);
}

#[test]
fn describe_statement_takes_two_messages_and_execute_many() {
    let mut r = Owed::default();
    push_all(&mut r, &client(b"DES"));
    let (d, _) = run(
        &mut r,
        &[
            PARAMETER_DESCRIPTION,
            ROW_DESCRIPTION,
            DATA_ROW,
            DATA_ROW,
            PORTAL_SUSPENDED,
            READY_FOR_QUERY,
        ],
    );
    assert!(all_forward(&d));
    assert!(r.is_empty());
}

#[test]
fn libpq_copy_in_through_the_extended_protocol_ignores_the_first_sync() {
    // PQexecParams("COPY t FROM STDIN"): P B D E S, then d... c S.
    let mut r = Owed::default();
    push_all(&mut r, &client(b"PBDES"));
    let (d, _) = run(
        &mut r,
        &[PARSE_COMPLETE, BIND_COMPLETE, NO_DATA, COPY_IN_RESPONSE],
    );
    assert!(all_forward(&d));
    assert_eq!(r.copy(), Some(CopyDir::In));
    push_all(&mut r, &client(b"ddcS"));
    let (d, _) = run(&mut r, &[COMMAND_COMPLETE, READY_FOR_QUERY]);
    assert!(all_forward(&d));
    assert!(r.is_empty());
    assert_eq!(r.copy(), None);
}

#[test]
fn copy_in_pipelined_ahead_of_the_server() {
    let mut r = Owed::default();
    push_all(&mut r, &client(b"PBDESScS"));
    let (d, _) = run(
        &mut r,
        &[
            PARSE_COMPLETE,
            BIND_COMPLETE,
            NO_DATA,
            COPY_IN_RESPONSE,
            COMMAND_COMPLETE,
            READY_FOR_QUERY,
        ],
    );
    assert!(all_forward(&d));
    assert!(r.is_empty(), "{r:?}");
}

#[test]
fn copy_that_fails_before_it_starts_leaves_its_copy_done_harmless() {
    // The table does not exist: the Execute fails, the first Sync answers,
    // the CopyDone is ignored outside COPY and the second Sync answers.
    let mut r = Owed::default();
    push_all(&mut r, &client(b"PBDEScS"));
    let (d, _) = run(
        &mut r,
        &[
            PARSE_COMPLETE,
            BIND_COMPLETE,
            NO_DATA,
            ERROR_RESPONSE,
            READY_FOR_QUERY,
            READY_FOR_QUERY,
        ],
    );
    assert!(all_forward(&d));
    assert!(r.is_empty());
}

#[test]
fn copy_in_error_mid_stream_skips_to_the_second_sync() {
    let mut r = Owed::default();
    push_all(&mut r, &client(b"PBDES"));
    let (d, _) = run(
        &mut r,
        &[
            PARSE_COMPLETE,
            BIND_COMPLETE,
            NO_DATA,
            COPY_IN_RESPONSE,
            ERROR_RESPONSE,
        ],
    );
    assert!(all_forward(&d));
    assert_eq!(r.copy(), None);
    push_all(&mut r, &client(b"dcS"));
    let (d, _) = run(&mut r, &[READY_FOR_QUERY]);
    assert!(all_forward(&d));
    assert!(r.is_empty());
}

#[test]
fn simple_copy_in_with_a_client_sync_during_copy() {
    let mut r = Owed::default();
    push_all(&mut r, &client(b"Q"));
    let (d, _) = run(&mut r, &[COPY_IN_RESPONSE]);
    assert!(all_forward(&d));
    // The Sync inside COPY is ignored, the one after is not.
    push_all(&mut r, &client(b"SdcS"));
    let (d, _) = run(
        &mut r,
        &[COMMAND_COMPLETE, READY_FOR_QUERY, READY_FOR_QUERY],
    );
    assert!(all_forward(&d));
    assert!(r.is_empty());
}

#[test]
fn extended_copy_out() {
    let mut r = Owed::default();
    push_all(&mut r, &client(b"PBES"));
    let (d, _) = run(
        &mut r,
        &[
            PARSE_COMPLETE,
            BIND_COMPLETE,
            COPY_OUT_RESPONSE,
            COPY_DATA,
            COPY_DATA,
            COPY_DONE,
            COMMAND_COMPLETE,
            READY_FOR_QUERY,
        ],
    );
    assert!(all_forward(&d));
    assert!(r.is_empty());
}

#[test]
fn pooler_statements_are_dropped_and_their_errors_kept() {
    let mut r = Owed::default();
    push_all(
        &mut r,
        &[
            Expect::Injected(Reply::Query { follows: false }),
            Expect::Injected(Reply::Query { follows: false }),
            Expect::Client(Reply::Query { follows: false }),
        ],
    );
    let mut fixes = Vec::new();
    let seq = [
        (PARAMETER_STATUS, None, Drop),
        (NOTICE_RESPONSE, None, Drop),
        (NOTIFICATION_RESPONSE, None, Forward),
        (COMMAND_COMPLETE, None, Drop),
        (READY_FOR_QUERY, None, Drop),
        (ERROR_RESPONSE, Some(&b"boom"[..]), Drop),
        (READY_FOR_QUERY, None, Drop),
        (ROW_DESCRIPTION, None, Forward),
        (READY_FOR_QUERY, None, Forward),
    ];
    for (tag, body, want) in seq {
        assert_eq!(r.on_server(tag, body, &mut fixes), Ok(want));
    }
    assert_eq!(r.take_pooler_error().as_deref(), Some(&b"boom"[..]));
    assert!(r.is_empty());
}

#[test]
fn unexpected_replies_are_reported() {
    let mut r = Owed::default();
    let mut fixes = Vec::new();
    assert_eq!(
        r.on_server(DATA_ROW, None, &mut fixes),
        Err(Unexpected(DATA_ROW))
    );
    assert_eq!(r.on_server(ERROR_RESPONSE, None, &mut fixes), Ok(Forward));
    assert_eq!(r.on_server(NOTICE_RESPONSE, None, &mut fixes), Ok(Forward));
    push_all(&mut r, &client(b"B"));
    assert!(r.on_server(PARSE_COMPLETE, None, &mut fixes).is_err());
    let mut r2 = Owed::default();
    push_all(&mut r2, &client(b"S"));
    assert!(r2.on_server(COMMAND_COMPLETE, None, &mut fixes).is_err());
}

#[test]
fn unsynced_counts_the_open_batch() {
    let mut r = Owed::default();
    push_all(&mut r, &client(b"PB"));
    r.flushed();
    assert_eq!(r.unsynced(), 3);
    push_all(&mut r, &client(b"S"));
    assert_eq!(r.unsynced(), 0);
}

#[test]
fn random_sequences_never_panic() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let server = b"123CDEGHIZnNSstTdcWAVK";
    for _ in 0..2000 {
        let mut r = Owed::default();
        let mut fixes = Vec::new();
        let mut due = Vec::new();
        for _ in 0..40 {
            if next() % 2 == 0 {
                let t = b"QPBDECSFcf"[(next() % 10) as usize];
                let e = match Reply::for_frontend(t) {
                    Some(rep) if next() % 5 == 0 => Expect::Injected(rep),
                    Some(rep) => Expect::Client(rep),
                    None => Expect::CopyEnd,
                };
                r.push(e, &mut fixes);
            } else {
                r.take_due(&mut due, &mut fixes);
                let _ = r.on_server(
                    server[(next() % server.len() as u64) as usize],
                    None,
                    &mut fixes,
                );
            }
        }
    }
}

#[test]
fn what_passes_unaccounted_changes_nothing() {
    let heads = [
        vec![Expect::Client(Reply::Query { follows: false })],
        vec![Expect::Client(Reply::Execute), Expect::Client(Reply::Sync)],
        vec![Expect::Injected(Reply::Query { follows: false })],
        vec![Expect::Client(Reply::Sync)],
    ];
    for head in &heads {
        for copying in [None, Some(COPY_IN_RESPONSE), Some(COPY_OUT_RESPONSE)] {
            for tag in 0..=255u8 {
                let mut r = Owed::default();
                push_all(&mut r, head);
                if let Some(c) = copying {
                    let _ = r.on_server(c, None, &mut Vec::new());
                }
                if !r.passes(tag) {
                    continue;
                }
                let before = format!("{r:?}");
                let d = r.on_server(tag, Some(b""), &mut Vec::new());
                assert_eq!(d, Ok(Forward), "{head:?} {copying:?} {tag}");
                assert_eq!(format!("{r:?}"), before, "{head:?} {copying:?} {tag}");
            }
        }
    }
}

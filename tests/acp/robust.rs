//! `$/cancel_request`, and gjc under a client that misbehaves: its parent dies, or it stops
//! reading stdout in the middle of a long reply.

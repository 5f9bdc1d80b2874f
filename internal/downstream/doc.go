// Package downstream is a fake outside world served over HTTP: the
// services an agent's tools act on (clouds, databases, payment providers,
// mail), reduced to one process that records every call. The demo of
// continuumctl and the SIGKILL crash harness run it in the parent process
// and point the agent, a child process that gets killed, at its URL: the
// server outlives the agent, as the real world does, and counts the effects
// each idempotency key took, so a test can assert that nothing happened
// twice.
//
// # Usage
//
//	srv, err := downstream.Start(&downstream.Options{
//		AfterEffect: func(c downstream.Call) { /* e.g. SIGKILL the agent */ },
//	})
//	defer srv.Close()
//	cl := downstream.NewClient(srv.URL()) // implements agent.Downstream
//	res, err := cl.Exec(ctx, "billing.charge", args, "deploy/eu/charge", false)
//	for _, e := range srv.Effects() { fmt.Println(e.Key, e.Effects) }
//
// # Protocol
//
//	POST /call     {"tool":..,"args":{..},"key":..,"idempotent":bool}
//	               -> 200, body = the result bytes; 400 for a bad request
//	GET  /lookup?key=K
//	               -> 200, body = the result of the first effect under K;
//	                  404 if no call under K took effect
//	GET  /effects  -> 200, {"effects":[{"key","tool","effects","calls"},..]}
//	               in the order the keys were first called
//
// Idempotent calls honour the key: a repeated call under a key that took
// effect returns the first result and takes no new effect. Other calls take
// effect every time (that is what makes a duplicate visible). Results come
// from Options.Result, by default workload.Downstream: pure functions of
// (tool, args, key), so runs are deterministic.
//
// # Hooks
//
// BeforeEffect runs after a call is received and before it takes effect;
// AfterEffect runs after the effect is recorded and before the reply is
// sent. A crash harness kills the agent in either one: killed in
// BeforeEffect the call never happened (a lookup finds nothing); killed in
// AfterEffect the call happened but the agent never heard back, so the
// action is in doubt when the agent restarts and must be reconciled with
// GET /lookup.
//
// # Caveats
//
//   - State is in memory: it lives as long as the Server, not longer.
//   - The server listens on 127.0.0.1 only, on a port the kernel picks.
//   - Client.Lookup (the agent.Downstream method) cannot return an error;
//     after retrying for LookupTimeout it reports "no trace", which a caller
//     would take as "the call did not happen". Callers that can should use
//     Client.LookupContext, which returns the error instead.
package downstream

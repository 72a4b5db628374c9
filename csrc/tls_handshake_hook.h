// Sees every TLS handshake our clients make, directly or through a proxy's CONNECT tunnel.
//
// aws-c-io lets a client hear a handshake's outcome through aws_tls_connection_options, but a proxy tunnel
// (aws-c-http) replaces that callback with its own, and a handshake whose peer answers in plain HTTP and
// closes never reports an outcome at all (s2n waits for the rest of what it takes for a TLS record). The
// linker routes the two places that create client TLS handlers (the channel bootstrap and the proxy tunnel)
// through this file (--wrap, CMakeLists.txt), which, for the contexts registered here:
// - reports each handshake's outcome to the context's TlsHandshakeWatch, then to whoever asked for it;
// - looks at the first bytes the server sends: a TLS server's first record is a handshake or an alert, so
//   anything else (nginx's "HTTP/1.1 400 ...") fails the handshake at once as "not TLS".
// Connections of unregistered contexts are left exactly as aws-c-io makes them.
#pragma once

struct aws_tls_ctx;

namespace torchdata_s3 {

class TlsHandshakeWatch;

// From now until forget_tls_context(ctx), handshakes with `ctx` report to `watch`.
void watch_tls_context(aws_tls_ctx* ctx, TlsHandshakeWatch* watch);
void forget_tls_context(aws_tls_ctx* ctx);

}  // namespace torchdata_s3

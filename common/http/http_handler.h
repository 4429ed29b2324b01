// HttpHandler: what an HttpServer calls for each request.
//
// Thread-safety: called on the server's I/O thread, one request of a
// connection at a time; it must not block, and answers through the
// responder then or later, from any thread.
#ifndef PDSERVE_COMMON_HTTP_HTTP_HANDLER_H_
#define PDSERVE_COMMON_HTTP_HTTP_HANDLER_H_

#include <functional>
#include <memory>

#include "common/http/http_request.h"
#include "common/http/http_responder.h"

namespace pdserve {

using HttpHandler =
    std::function<void(HttpRequest request, std::shared_ptr<HttpResponder> responder)>;

}  // namespace pdserve

#endif  // PDSERVE_COMMON_HTTP_HTTP_HANDLER_H_

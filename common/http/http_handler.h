// HttpHandler: what an HttpServer calls for each request.
//
// Thread-safety: called on the server's I/O thread, one request of a
// connection at a time; it must not block, and answers through the
// responder then or later, from any thread.
#ifndef PDSERVE_COMMON_HTTP_HTTP_HANDLER_H_
#define PDSERVE_COMMON_HTTP_HTTP_HANDLER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "common/http/http_request.h"
#include "common/http/http_responder.h"

namespace pdserve {

using HttpHandler =
    std::function<void(HttpRequest request, std::shared_ptr<HttpResponder> responder)>;

// The content type and body of an error the server answers itself (400 for
// a malformed request, 413, 431, 500 for a dropped responder), so an API
// can give them its own error shape. Called on the I/O thread.
using HttpErrorBody = std::function<std::pair<std::string, std::string>(int status)>;

}  // namespace pdserve

#endif  // PDSERVE_COMMON_HTTP_HTTP_HANDLER_H_

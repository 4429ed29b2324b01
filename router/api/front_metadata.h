// The metadata by which the HTTP front (openai/openai_front.h) tells the router's
// gRPC service about a call it makes for an HTTP client. The service
// believes the peer address only when the key matches the secret the front
// was started with (GenerationService::TrustFront), so a gRPC client
// cannot pose as the front to dodge its per-client limit.
#ifndef PDSERVE_ROUTER_API_FRONT_METADATA_H_
#define PDSERVE_ROUTER_API_FRONT_METADATA_H_

namespace pdserve::router {

inline constexpr char kFrontKeyMetadata[] = "x-pdserve-front-key";
// The HTTP client's address (without its port).
inline constexpr char kFrontPeerMetadata[] = "x-pdserve-front-peer";

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_API_FRONT_METADATA_H_

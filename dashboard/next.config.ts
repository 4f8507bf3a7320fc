// Next.js configuration: a static export (served by `orq serve --dashboard out/` at `/`, with the
// API under `/api/v1` on the same origin). Only `next dev` proxies `/api/v1` to a running orq
// (ORQ_API, default http://127.0.0.1:8080), because rewrites do not exist in a static export.
import type { NextConfig } from "next";
import { PHASE_DEVELOPMENT_SERVER } from "next/constants";

export default function config(phase: string): NextConfig {
  const base: NextConfig = {
    output: "export",
    trailingSlash: true,
    images: { unoptimized: true },
    reactStrictMode: true,
    poweredByHeader: false,
  };
  if (phase !== PHASE_DEVELOPMENT_SERVER) {
    return base;
  }
  const api = process.env.ORQ_API ?? "http://127.0.0.1:8080";
  return {
    ...base,
    output: undefined,
    // API paths have no trailing slash: keep the pages' slash redirect away from them.
    skipTrailingSlashRedirect: true,
    async rewrites() {
      return [{ source: "/api/v1/:path*", destination: `${api}/api/v1/:path*` }];
    },
  };
}

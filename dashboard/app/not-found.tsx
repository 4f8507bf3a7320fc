// The page of a path the dashboard does not have (the export's 404.html, which orq answers with
// 404), in the dashboard's shell and styles. Next.js's own not-found page inserts an inline
// <style>, which orq's Content-Security-Policy blocks (server/src/security_headers.rs).

import Link from "next/link";
import { PageTitle } from "@/components/ui";

export default function NotFound() {
  return (
    <>
      <PageTitle sub="orq's dashboard has no page at this address.">Not found</PageTitle>
      <p data-testid="not-found">
        <Link href="/">Go to the overview</Link>
      </p>
    </>
  );
}

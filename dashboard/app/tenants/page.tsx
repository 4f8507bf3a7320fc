"use client";
// Tenants of the selected queue: counts, fair-share weight and limits, service received; edit a
// tenant's weight and limits (PUT /queues/{q}/tenants/{t}).

import { createColumnHelper } from "@tanstack/react-table";
import { useMemo, useState } from "react";
import { DataTable } from "@/components/DataTable";
import { Modal } from "@/components/Dialog";
import { useAdminDenied, useLive, useQueue, useToast } from "@/components/providers";
import { Card, ErrorBox, Loading, PageTitle } from "@/components/ui";
import { api, errorMessage, NEEDS_ADMIN } from "@/lib/api";
import { formatNumber } from "@/lib/format";
import { useResource } from "@/lib/hooks";
import { STATUS_COLOURS, type TenantLimits, type TenantStats } from "@/lib/types";

const FIELDS: Array<{ key: keyof TenantLimits; label: string; hint: string; int: boolean; min: number; max: number }> = [
  { key: "weight", label: "Weight", hint: "fair-share weight, default 1", int: false, min: 0, max: 1000 },
  { key: "max_inflight", label: "Max in flight", hint: "live leases, empty = no cap", int: true, min: 1, max: 1_000_000 },
  { key: "max_queued", label: "Max queued", hint: "waiting tasks; beyond it submits get 429", int: true, min: 0, max: 1_000_000_000 },
  { key: "rate_per_s", label: "Rate (leases/s)", hint: "token bucket rate, empty = unlimited", int: false, min: 0, max: 1_000_000 },
  { key: "burst", label: "Burst", hint: "token bucket size", int: true, min: 1, max: 1_000_000 },
];

function EditTenant({
  queue,
  tenant,
  onClose,
  onSaved,
}: {
  queue: string;
  tenant: TenantStats | null;
  onClose: () => void;
  onSaved: () => void;
}) {
  const toast = useToast();
  const [name, setName] = useState(tenant?.tenant ?? "");
  const [values, setValues] = useState<Record<string, string>>(() =>
    Object.fromEntries(
      FIELDS.map((f) => {
        const v = tenant?.[f.key as keyof TenantStats];
        return [f.key, v === null || v === undefined || (f.key === "weight" && v === 1) ? "" : String(v)];
      }),
    ),
  );
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const save = async () => {
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(name)) {
      setError("tenant: letters, digits, . _ - (1 to 64)");
      return;
    }
    const body: TenantLimits = {};
    for (const f of FIELDS) {
      const raw = (values[f.key] ?? "").trim();
      if (raw === "") {
        body[f.key] = null; // removes the setting (weight back to 1)
        continue;
      }
      const n = Number(raw);
      const ok = Number.isFinite(n) && (f.int ? Number.isInteger(n) && n >= f.min : n > f.min) && n <= f.max;
      if (!ok) {
        setError(`${f.label}: ${f.int ? `a whole number from ${f.min}` : `a number above ${f.min}`} to ${f.max}`);
        return;
      }
      body[f.key] = n;
    }
    setBusy(true);
    setError(null);
    try {
      await api.putTenant(queue, name, body);
      toast("ok", `Tenant ${name} of ${queue} updated`);
      onSaved();
      onClose();
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title={tenant ? `Limits of tenant ${tenant.tenant}` : "Configure a tenant"} onClose={onClose}>
      <form
        aria-label="Tenant limits"
        onSubmit={(e) => {
          e.preventDefault();
          void save();
        }}
      >
        <div className="form-grid">
          {!tenant && (
            <label className="field span-all">
              Tenant
              <input name="tenant" value={name} onChange={(e) => setName(e.target.value)} autoFocus />
            </label>
          )}
          {FIELDS.map((f) => (
            <label key={f.key} className="field" title={f.hint}>
              {f.label}
              <input
                name={f.key}
                inputMode="decimal"
                value={values[f.key] ?? ""}
                placeholder={f.key === "weight" ? "1" : "none"}
                onChange={(e) => setValues((v) => ({ ...v, [f.key]: e.target.value }))}
              />
            </label>
          ))}
        </div>
        <p className="muted">Leave a field empty to remove that limit (weight back to 1).</p>
        {error && (
          <p className="field-error" role="alert">
            {error}
          </p>
        )}
        <div className="modal-actions">
          <button type="button" onClick={onClose} disabled={busy}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={busy} data-testid="save-tenant">
            {busy ? "Saving…" : "Save"}
          </button>
        </div>
      </form>
    </Modal>
  );
}

const col = createColumnHelper<TenantStats>();

export default function TenantsPage() {
  const { queue } = useQueue();
  const { tick } = useLive();
  // The page shown: null for the first, else the `next_cursor` that led to it (back to the first
  // page when the queue changes).
  const [page, setPage] = useState<{ queue: string; cursor: string | null }>({ queue, cursor: null });
  const cursor = page.queue === queue ? page.cursor : null;
  const tenants = useResource((signal) => api.tenants(queue, cursor, signal), [queue, tick, cursor]);
  const [editing, setEditing] = useState<TenantStats | "new" | null>(null);
  // After a 403 from an admin-only route the key is known not to be an admin key: limits are
  // read-only, and the controls say why.
  const denied = useAdminDenied();
  const columns = useMemo(
    () => [
      col.accessor("tenant", { header: "Tenant", cell: (c) => <b>{c.getValue()}</b> }),
      col.accessor((t) => t.counts.queued, { id: "queued", header: "Queued", cell: (c) => formatNumber(c.getValue()) }),
      col.accessor((t) => t.counts.leased, { id: "leased", header: "Leased", cell: (c) => formatNumber(c.getValue()) }),
      col.accessor((t) => t.counts.scheduled + t.counts.retrying, {
        id: "waiting",
        header: "Sched./retry",
        cell: (c) => formatNumber(c.getValue()),
      }),
      col.accessor((t) => t.counts.dead, {
        id: "dead",
        header: "Dead",
        cell: (c) => <span style={{ color: c.getValue() > 0 ? STATUS_COLOURS.dead : undefined }}>{formatNumber(c.getValue())}</span>,
      }),
      col.accessor("weight", { header: "Weight", cell: (c) => <span data-testid={`weight-${c.row.original.tenant}`}>{formatNumber(c.getValue())}</span> }),
      col.accessor("max_inflight", {
        header: "Max in flight",
        cell: (c) => <span data-testid={`max_inflight-${c.row.original.tenant}`}>{c.getValue() ?? "—"}</span>,
      }),
      col.accessor("max_queued", { header: "Max queued", cell: (c) => c.getValue() ?? "—" }),
      col.accessor("rate_per_s", {
        header: "Rate",
        cell: (c) => (c.getValue() === null ? "—" : `${formatNumber(c.getValue())}/s, burst ${c.row.original.burst ?? "—"}`),
      }),
      col.accessor("served", { header: "Served", cell: (c) => formatNumber(c.getValue()) }),
      col.accessor("share", {
        header: "Share",
        // null for a tenant key (it does not see the other tenants).
        cell: (c) => {
          const share = c.getValue();
          if (share === null) return "—";
          return (
            <div className="row nowrap" style={{ gap: 6 }}>
              <div className="stackbar" style={{ minWidth: 56 }}>
                <div style={{ width: `${Math.round(share * 100)}%`, background: "#2563eb" }} />
              </div>
              {Math.round(share * 100)} %
            </div>
          );
        },
      }),
      col.accessor("completed_per_s", { header: "Done/s (1 min)", cell: (c) => c.getValue().toFixed(2) }),
      col.display({
        id: "edit",
        header: "",
        cell: (c) => (
          <button
            type="button"
            className="small nowrap"
            onClick={() => setEditing(c.row.original)}
            data-testid={`edit-tenant-${c.row.original.tenant}`}
            disabled={denied}
            title={denied ? `Editing limits ${NEEDS_ADMIN}` : undefined}
          >
            Edit limits
          </button>
        ),
      }),
    ],
    [denied],
  );
  return (
    <>
      <PageTitle sub={`Weighted fair sharing within queue ${queue}: each backlogged tenant gets its weight's share of leases.`}>
        Tenants
      </PageTitle>
      <Card
        title={`Tenants of ${queue}`}
        actions={
          <>
            {denied && (
              <span className="muted" data-testid="limits-need-admin">
                Editing limits {NEEDS_ADMIN}
              </span>
            )}
            <button type="button" onClick={() => setEditing("new")} disabled={denied} title={denied ? `Configuring a tenant ${NEEDS_ADMIN}` : undefined}>
              Configure a tenant…
            </button>
          </>
        }
      >
        {tenants.loading ? (
          <Loading what="Loading tenants" />
        ) : tenants.error && !tenants.data ? (
          <ErrorBox error={tenants.error} retry={tenants.reload} />
        ) : (
          <DataTable
            label="Tenants"
            className="wrap-heads"
            data={tenants.data?.tenants ?? []}
            columns={columns}
            rowId={(t) => t.tenant}
            rowTestId={(t) => `tenant-row-${t.tenant}`}
            empty={`No tenant has submitted to ${queue} yet.`}
          />
        )}
        {tenants.data && (cursor !== null || tenants.data.next_cursor !== null) && (
          <div className="row" data-testid="tenants-pager">
            <span>
              {tenants.data.tenants.length} of {tenants.data.tenants_total} tenants, by name
            </span>
            <button type="button" disabled={cursor === null} onClick={() => setPage({ queue, cursor: null })}>
              First page
            </button>
            <button
              type="button"
              disabled={tenants.data.next_cursor === null}
              onClick={() => setPage({ queue, cursor: tenants.data?.next_cursor ?? null })}
            >
              Next page
            </button>
          </div>
        )}
      </Card>
      {editing && (
        <EditTenant
          queue={queue}
          tenant={editing === "new" ? null : editing}
          onClose={() => setEditing(null)}
          onSaved={tenants.reload}
        />
      )}
    </>
  );
}

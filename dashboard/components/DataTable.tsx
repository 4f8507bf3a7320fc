"use client";
// A table on @tanstack/react-table: sortable columns (click a header), an empty state, and an
// optional test id per row.

import {
  flexRender,
  getCoreRowModel,
  getSortedRowModel,
  useReactTable,
  type ColumnDef,
  type SortingState,
} from "@tanstack/react-table";
import { useState, type ReactNode } from "react";

export interface DataTableProps<T> {
  data: T[];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  columns: ColumnDef<T, any>[];
  empty: ReactNode;
  rowId: (row: T) => string;
  rowTestId?: (row: T) => string;
  rowClass?: (row: T) => string | undefined;
  label: string;
  /** A class for the table (`wrap-heads`: headers may wrap, for wide tables). */
  className?: string;
}

export function DataTable<T>({
  data,
  columns,
  empty,
  rowId,
  rowTestId,
  rowClass,
  label,
  className,
}: DataTableProps<T>) {
  const [sorting, setSorting] = useState<SortingState>([]);
  // TanStack Table returns functions that React Compiler must not memoise; this component is
  // not compiled, so the lint rule's warning does not apply.
  // eslint-disable-next-line react-hooks/incompatible-library
  const table = useReactTable({
    data,
    columns,
    state: { sorting },
    onSortingChange: setSorting,
    getCoreRowModel: getCoreRowModel(),
    getSortedRowModel: getSortedRowModel(),
    getRowId: rowId,
  });
  return (
    <div className="table-wrap">
      <table aria-label={label} className={className}>
        <thead>
          {table.getHeaderGroups().map((hg) => (
            <tr key={hg.id}>
              {hg.headers.map((h) => {
                const sort = h.column.getIsSorted();
                return (
                  <th
                    key={h.id}
                    onClick={h.column.getCanSort() ? h.column.getToggleSortingHandler() : undefined}
                    className={h.column.getCanSort() ? "sortable" : undefined}
                    aria-sort={
                      sort === "asc" ? "ascending" : sort === "desc" ? "descending" : undefined
                    }
                  >
                    {h.isPlaceholder ? null : flexRender(h.column.columnDef.header, h.getContext())}
                    {sort === "asc" ? " ▲" : sort === "desc" ? " ▼" : ""}
                  </th>
                );
              })}
            </tr>
          ))}
        </thead>
        <tbody>
          {table.getRowModel().rows.map((row) => (
            <tr
              key={row.id}
              data-testid={rowTestId?.(row.original)}
              className={rowClass?.(row.original)}
            >
              {row.getVisibleCells().map((cell) => (
                <td key={cell.id}>{flexRender(cell.column.columnDef.cell, cell.getContext())}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      {data.length === 0 && <div className="state state-empty">{empty}</div>}
    </div>
  );
}

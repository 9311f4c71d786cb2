-- level_merge (a piece of the scripts that read a partition's level streams as one, spliced
-- in by sluice.protocol.scripts after lib/levels.lua): rows of several streams walked in id
-- order, and a consumer group's figures summed over every stream of its partition.  With
-- one stream (a partition without level streams) each answers what that stream answers.
-- merge_walk(fetches, n, reverse, chunk, visit): walks the rows of several sources merged in
--   id order (newest first when reverse), at most n of them; fetches[k](after, count) answers
--   source k's next rows (each row's first element its id): its first ones when after is
--   nil, else those past the id after.  One source is read chunk rows a call, several
--   MERGE_CHUNK a call each.  visit(row, k), when given, is called on each row walked.
--   Returns how many rows it walked, the last of them and its source k (nil when none).
-- group_totals(log): XINFO GROUPS of log ({} without the stream), each group's pending,
--   entries-read and lag summed over every stream of the partition (false when Redis does not
--   know one of them on some stream), its last-delivered-id the latest of them; and, when the
--   partition has level streams, each stream's own groups, highest level first:
--   {{level, stream, {group name -> its XINFO GROUPS fields}}, ...} ({} without them).
-- pending_totals(log, group): the XPENDING summary of the group over every stream (false
--   when the group does not exist): {count, first id, last id, {{consumer, count}, ...}}.
-- fields_of(flat): a flat XINFO reply as a table of its fields; groups_by_name(stream): the
--   stream's groups, name -> fields ({} without the stream).
-- include lib/stream_ids.lua
local MERGE_CHUNK = 1000
local function merge_walk(fetches, n, reverse, chunk, visit)
  local walked, last, last_k = 0, nil, nil
  if #fetches == 1 then
    local after = nil
    while walked < n do
      local want = math.min(n - walked, chunk)
      local got = fetches[1](after, want)
      for i = 1, #got do
        if visit then visit(got[i], 1) end
      end
      if #got > 0 then
        last, last_k, after = got[#got], 1, got[#got][1]
        walked = walked + #got
      end
      if #got < want then break end
    end
    return walked, last, last_k
  end
  local heads = {}
  for k = 1, #fetches do heads[k] = {rows = {}, i = 1, more = true} end
  -- Whether the id ms-seq goes before head b's row (ids of different streams never tie).
  local function before(ms, seq, b)
    if reverse then return ms > b.ms or (ms == b.ms and seq > b.seq) end
    return ms < b.ms or (ms == b.ms and seq < b.seq)
  end
  local function row_before(row, b)
    local ms, seq = id_parts(row[1])
    return before(ms, seq, b)
  end
  while walked < n do
    local best, second = nil, nil
    for k, h in ipairs(heads) do
      if h.i > #h.rows and h.more then
        local after = h.rows[#h.rows] and h.rows[#h.rows][1]
        local want = math.min(n - walked, MERGE_CHUNK)
        h.rows, h.i = fetches[k](after, want), 1
        h.more = #h.rows == want
        if h.rows[1] then h.ms, h.seq = id_parts(h.rows[1][1]) end
      end
      if h.i <= #h.rows then
        if not best or before(h.ms, h.seq, heads[best]) then
          best, second = k, best
        elseif not second or before(h.ms, h.seq, heads[second]) then
          second = k
        end
      end
    end
    if not best then break end
    -- The best head's rows before the next head's row go in one run (found by bisection).
    local h, other = heads[best], second and heads[second]
    local j = #h.rows
    if other and not row_before(h.rows[j], other) then
      local lo, hi = h.i, j  -- rows[lo] goes before the other head's, rows[hi] does not
      while hi - lo > 1 do
        local mid = math.floor((lo + hi) / 2)
        if row_before(h.rows[mid], other) then lo = mid else hi = mid end
      end
      j = lo
    end
    j = math.min(j, h.i + n - walked - 1)
    if visit then
      for i = h.i, j do visit(h.rows[i], best) end
    end
    walked = walked + j - h.i + 1
    last, last_k, h.i = h.rows[j], best, j + 1
    if h.rows[h.i] then h.ms, h.seq = id_parts(h.rows[h.i][1]) end
  end
  return walked, last, last_k
end

-- A flat XINFO reply (a group's, a stream's, a consumer's) as a table of its fields.
local function fields_of(flat)
  local fields = {}
  for i = 1, #flat, 2 do fields[flat[i]] = flat[i + 1] end
  return fields
end

-- XINFO GROUPS of one stream, each group's fields by name ({} without the stream).
local function groups_by_name(stream, found)
  found = found or redis.pcall('XINFO', 'GROUPS', stream)
  local out = {}
  if type(found) ~= 'table' or found.err then return out end
  for _, g in ipairs(found) do
    local fields = fields_of(g)
    out[fields['name']] = fields
  end
  return out
end

local function group_totals(log)
  local groups = redis.pcall('XINFO', 'GROUPS', log)
  if type(groups) ~= 'table' or groups.err then return {}, {} end
  local per, main = {}, false
  for _, level in ipairs(side_levels(log)) do
    if level < 4 and not main then
      per[#per + 1] = {4, log, groups_by_name(log, groups)}
      main = true
    end
    local stream = level_stream(log, level)
    per[#per + 1] = {level, stream, groups_by_name(stream)}
  end
  if #per == 0 then return groups, per end
  if not main then per[#per + 1] = {4, log, groups_by_name(log, groups)} end
  for _, g in ipairs(groups) do
    local at = {}
    for i = 1, #g, 2 do at[g[i]] = i + 1 end
    local name = g[at['name']]
    for _, entry in ipairs(per) do
      local other = entry[2] ~= log and entry[3][name]
      if other then
        g[at['pending']] = g[at['pending']] + other['pending']
        for _, field in ipairs({'entries-read', 'lag'}) do
          local mine = at[field] and g[at[field]]
          if type(mine) == 'number' and type(other[field]) == 'number' then
            g[at[field]] = mine + other[field]
          elseif at[field] then
            g[at[field]] = false
          end
        end
        if id_before(g[at['last-delivered-id']], other['last-delivered-id']) then
          g[at['last-delivered-id']] = other['last-delivered-id']
        end
      end
    end
  end
  return groups, per
end

local function pending_totals(log, group)
  local streams = streams_of(log)
  if #streams == 1 then
    local summary = redis.pcall('XPENDING', log, group)
    if type(summary) ~= 'table' or summary.err then return false end
    return summary
  end
  return pending_over(streams, group, true)
end

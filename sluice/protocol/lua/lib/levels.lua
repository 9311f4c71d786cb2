-- levels (a piece of every script that reads or writes a partition's entries, spliced in by
-- sluice.protocol.scripts): a partition's stream per priority level.
-- A partition keeps its entries of the default priority (4, no field "u") in its stream
-- ("sl:{P}:log"), and, once it uses level streams (docs/priority.md), each other priority L
-- in a stream of its own, "sl:{P}:log:L".  The partition's hash "sl:{P}:levels" has a field
-- L (the last id written to stream L) for every level stream that exists.  Every consumer
-- group of the partition exists on each of its streams.
-- An entry of a level stream has the id "<ms>-1L<14 digits>": a sequence number of 16
-- digits whose second names its level, so an id alone says which stream holds it, and ids of
-- all the streams sort together in arrival order (to the millisecond).
-- level_of(id): the level of an id of a level stream, or nil (the partition's stream).
-- stream_of(log, id): the stream holding the entry of that id (log: the partition's stream).
-- level_stream(log, level): the stream of a level (log itself for 4).
-- levels_key(log): the partition's levels hash.
-- side_levels(log): the levels that have a stream of their own, highest first.
-- streams_of(log): every stream of the partition, highest level first, log in 4's place.
-- by_stream(log, ids): the ids grouped by stream, {{stream, {id, ...}}, ...}, each group in
-- the order given, groups in the order of their first id.
-- pending_over(streams, group, tolerant): XPENDING's summary of the group summed over the
-- streams, {count, first id, last id, {{consumer, count}, ...} or false}; tolerant: a stream
-- without the group (or without the stream) counts nothing, and false comes back when none
-- had it (else such a stream is an error).
local function level_of(id)
  local level = string.match(id, '^%d+%-1(%d)%d%d%d%d%d%d%d%d%d%d%d%d%d%d$')
  return level and tonumber(level) or nil
end
local function stream_of(log, id)
  local level = string.match(id, '^%d+%-1(%d)%d%d%d%d%d%d%d%d%d%d%d%d%d%d$')
  if level then return log .. ':' .. level end
  return log
end
local function level_stream(log, level)
  if level == 4 then return log end
  return log .. ':' .. level
end
local function levels_key(log)
  return string.sub(log, 1, -4) .. 'levels'
end
local LEVEL_FIELDS = {'9', '8', '7', '6', '5', '3', '2', '1', '0'}
local function side_levels(log)
  local found = redis.call('HMGET', levels_key(log), unpack(LEVEL_FIELDS))
  local out = {}
  for k, field in ipairs(LEVEL_FIELDS) do
    if found[k] then out[#out + 1] = tonumber(field) end
  end
  return out
end
local function streams_of(log)
  local out, main = {}, false
  for _, level in ipairs(side_levels(log)) do
    if level < 4 and not main then
      out[#out + 1] = log
      main = true
    end
    out[#out + 1] = log .. ':' .. level
  end
  if not main then out[#out + 1] = log end
  return out
end
local function id_earlier(a, b)
  local ams, aseq = string.match(a, '^(%d+)-(%d+)$')
  local bms, bseq = string.match(b, '^(%d+)-(%d+)$')
  ams, bms = tonumber(ams), tonumber(bms)
  return ams < bms or (ams == bms and tonumber(aseq) < tonumber(bseq))
end
local function pending_over(streams, group, tolerant)
  local total, low, high, per, order, any = 0, false, false, {}, {}, false
  for _, stream in ipairs(streams) do
    local summary = tolerant and redis.pcall('XPENDING', stream, group)
      or redis.call('XPENDING', stream, group)
    if type(summary) == 'table' and not summary.err then
      any = true
      if tonumber(summary[1]) > 0 then
        total = total + tonumber(summary[1])
        if not low or id_earlier(summary[2], low) then low = summary[2] end
        if not high or id_earlier(high, summary[3]) then high = summary[3] end
        for _, pair in ipairs(summary[4]) do
          if not per[pair[1]] then order[#order + 1] = pair[1] end
          per[pair[1]] = (per[pair[1]] or 0) + tonumber(pair[2])
        end
      end
    end
  end
  if not any then return false end
  local by_consumer = {}
  for k, name in ipairs(order) do by_consumer[k] = {name, tostring(per[name])} end
  return {total, low, high, #by_consumer > 0 and by_consumer or false}
end
local function by_stream(log, ids)
  local groups, at = {}, {}
  for _, id in ipairs(ids) do
    local key = stream_of(log, id)
    local g = at[key]
    if not g then
      g = {key, {}}
      at[key] = g
      groups[#groups + 1] = g
    end
    g[2][#g[2] + 1] = id
  end
  return groups
end

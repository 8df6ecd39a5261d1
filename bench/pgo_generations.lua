-- pgo_generations.lua -- a table-heavy Lua program whose generations are built and dropped
-- together (issue 36's Lua case).  usage: lua5.4 pgo_generations.lua RECORDS GENERATIONS SEED
-- Each generation is RECORDS records (a table with a few string and number fields and a small
-- array); two generations are alive at a time, the oldest dropped whole when a new one is built.
local n = tonumber(arg[1] or "50000")
local gens = tonumber(arg[2] or "8")
local seed = tonumber(arg[3] or "1")
math.randomseed(seed)
if os.getenv("GCMODE") then collectgarbage(os.getenv("GCMODE")) end
local alive = {}
local checksum = 0
for g = 1, gens do
  local gen = {}
  for i = 1, n do
    local k = math.random(1, 12)
    local tags = {}
    for j = 1, k do tags[j] = "t" .. ((i * j + g) % 97) end
    gen[i] = {
      id = i, gen = g,
      name = "rec-" .. g .. "-" .. i .. string.rep("x", math.random(0, 40)),
      score = math.random() * 100,
      tags = tags,
    }
  end
  alive[#alive + 1] = gen
  if #alive > 2 then table.remove(alive, 1) end
  if os.getenv("GCSTEP") then collectgarbage("step", 0) end
  for i = 1, n, 97 do checksum = checksum + #gen[i].tags + #gen[i].name end
end
print("records", n, "generations", gens, "checksum", checksum)

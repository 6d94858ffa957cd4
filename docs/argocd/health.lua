-- Argo CD health check of a TopologyAwareScheduling (tas.dev), for argocd-cm's
-- resource.customizations.health.tas.dev_TopologyAwareScheduling (docs/user-guide.md,
-- "GitOps"). Reads the conditions the operator writes: Ready sums up Available,
-- Progressing and Degraded at the generation in status.observedGeneration.
--
--   Healthy      Ready=True at the current generation
--   Suspended    spec.paused is true (the operator changes nothing)
--   Degraded     Degraded=True: something needs a human; the message says what
--   Progressing  anything else: not reconciled yet, rolling out, agents starting
local hs = {}

local function condition(conditions, type)
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report a status"
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to reconcile generation " .. tostring(generation)
  return hs
end

local conditions = obj.status.conditions
local degraded = condition(conditions, "Degraded")
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = degraded.reason .. ": " .. (degraded.message or "")
  return hs
end

if obj.spec ~= nil and obj.spec.paused == true then
  hs.status = "Suspended"
  hs.message = "spec.paused is true: the operator changes nothing until it is set back to false"
  return hs
end

local ready = condition(conditions, "Ready")
if ready == nil then
  -- An operator from before the Ready condition: Available alone.
  ready = condition(conditions, "Available")
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or ""
  return hs
end

hs.status = "Progressing"
if ready ~= nil then
  hs.message = ready.reason .. ": " .. (ready.message or "")
else
  hs.message = "Waiting for the operator to report readiness"
end
return hs

Never2
end(